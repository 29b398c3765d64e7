"""Readable --help: the metavars we write (TRACE, FILE, N), never typer's generated `{traces}...`,
`<bool>`, `<list[Path]>` or `<int range> [x>=0]`; an example under every command.

`TidyGroup` is the app's group class: when typer builds the command tree it swaps each parameter's
class for one that shows only the metavar given (flags show none), and leaves parsing untouched.
"""
from __future__ import annotations

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption


class _Argument(TyperArgument):
    def display_type(self, ctx) -> str:  # no "<list[Path]>" beside the name
        return ""

    def display_type_rich(self, ctx) -> str | None:
        return None

    def _rich_display_name(self) -> str:
        return self.display_name_raw

    def _usage_display_name(self) -> str:   # TRACE... / [SCRIPT_ARGS]..., not {traces}...
        name = self.display_name_raw
        dots = "..." if self.nargs != 1 and not name.endswith("...") else ""
        return (name if self.required else f"[{name}]") + dots

    def _get_number_range_help_str(self) -> str | None:
        return None


class _Option(TyperOption):
    def display_type(self, ctx) -> str:
        return "" if self.is_flag else (self.metavar or self.name.upper())

    def display_type_rich(self, ctx) -> str | None:  # flags: nothing; values: the metavar we gave
        if self.is_flag:
            return None
        return self.metavar or self.name.upper()

    def _get_number_range_help_str(self) -> str | None:  # the help text says the range in words
        return None


def tidy(command) -> None:
    """Swap the parameter classes of a command (and of its subcommands) for the tidy ones."""
    for p in getattr(command, "params", []):
        if type(p) is TyperArgument:
            p.__class__ = _Argument
        elif type(p) is TyperOption:
            p.__class__ = _Option
    for sub in (getattr(command, "commands", None) or {}).values():
        tidy(sub)


class TidyGroup(TyperGroup):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        tidy(self)

    def get_help_option(self, ctx):
        return _tidy_help(super().get_help_option(ctx))


def _tidy_help(opt):
    if type(opt) is TyperOption:
        opt.__class__ = _Option
    return opt


class TidyCommand(typer.core.TyperCommand):
    """The class of every command: its own --help option is made on demand, tidied here."""

    def get_help_option(self, ctx):
        return _tidy_help(super().get_help_option(ctx))


def examples(*lines: str) -> str:
    """An epilog of examples, one per line (rich keeps lines apart only with blank lines between)."""
    return "Examples:\n\n" + "\n\n".join(f"  {x}" for x in lines)
