"""Errors the CLI turns into one line on stderr and exit code 2."""


class TraceError(Exception):
    """Bad input: the message names the file and the problem, in one line."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UsageError(Exception):
    """Bad command-line use that typer itself cannot catch (one line, exit 2)."""
