"""The ``hive-lab`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func=handler(args) -> int``.
Add a module name to ``SUBCOMMANDS`` to plug a new one in.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

TYPE_CHECKING = False  # typing's own costs ~2.5 ms of each `hive-lab` start; type checkers read this as True
if TYPE_CHECKING:
    from typing import Any

SUBCOMMANDS = [
    "simulate",
    "submit",
    "jobs",
    "logs",
    "outputs",
    "cancel",
    "job_actions",
    "schedules",
    "vcs",
    "top",
    "demo",
    "kernelspec",
    "admin",
    "hub_config",
    "course",
]


def _columns() -> int:
    """``shutil.get_terminal_size().columns``, without importing shutil (which imports bz2, lzma and zlib:
    ~2 ms of every ``hive-lab`` start, for the width that argparse's formatter asks for even when no
    help is printed)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with the terminal's width found without shutil (:func:`_columns`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """argparse's ``RawDescriptionHelpFormatter`` (descriptions printed as written), as :class:`HelpFormatter`."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` (a module of SUBCOMMANDS) just that module's commands:
    ``hive-lab simulate ...`` then imports what simulate needs, not every other subcommand's modules."""
    return _build(only)[0]


def _build(only: str | None) -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(prog="hive-lab", description="hive-lab: shared GPUs for JupyterLab",
                                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only else SUBCOMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # not built yet
            raise
        module.register(sub)
    return parser, sub


def main(argv: list[str] | None = None) -> int:
    first = (sys.argv[1:] if argv is None else argv)[:1]
    parser = None
    if first and first[0] in SUBCOMMANDS:  # a command named like its module: build its parser alone
        parser, sub = _build(first[0])
        if first[0] not in sub.choices:
            parser = None
    if parser is None:
        parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from hive_lab import __version__

        print(__version__)
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
