"""`python -m foldwise.cli`: the same as the `foldwise` console script."""

from foldwise.cli._app import main

__all__: list[str] = []

main()
