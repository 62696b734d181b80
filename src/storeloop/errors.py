"""Errors that point at the user's input: file, line, field and what is allowed."""

from __future__ import annotations


class StoreloopError(Exception):
    """Base class of every error storeloop reports to a user (the CLI exits 2)."""


class SpecError(StoreloopError):
    """A problem in an input file, located by file, line and field path."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None, allowed: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.allowed = allowed
        super().__init__(self.render())

    def render(self) -> str:
        on_command_line = self.file is None and (self.field or "").startswith("-")
        where = self.file or ("command line" if on_command_line else "<input>")
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.field:
            text += f"option '{self.field}': " if on_command_line else f"field '{self.field}': "
        text += self.message
        if self.allowed:
            text += f"\n  allowed: {self.allowed}"
        return text


class MappingError(StoreloopError):
    """A mapping that is well-formed but cannot run on the architecture (capacity, fanout)."""

    def __init__(self, reason: str, *, level: str | None = None, tensor: str | None = None,
                 kind: str = "invalid"):
        self.reason = reason
        self.level = level
        self.tensor = tensor
        self.kind = kind
        super().__init__(reason)
