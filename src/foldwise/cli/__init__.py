"""The `foldwise` command line: a Typer app with one module per command group.

```console
$ foldwise config check foldwise.yaml
$ foldwise config check --json
$ foldwise bench tokens --quick
```
"""

from foldwise.cli._app import app, main

__all__ = ["app", "main"]
