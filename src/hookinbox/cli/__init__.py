"""The command line: `hookinbox serve`, `hookinbox migrate`, ..."""

from hookinbox.cli._main import main

__all__ = ["main"]
