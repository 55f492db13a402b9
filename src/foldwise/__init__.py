"""foldwise."""
