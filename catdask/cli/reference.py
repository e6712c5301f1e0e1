"""The CLI reference, ``docs/cli.md``, written from the parser itself: every command's and
subcommand's ``--help``, word for word, at a fixed width (:data:`WIDTH`)."""

from __future__ import annotations

import argparse
import functools
import sys

from .parser import build_parser

#: Columns the help is wrapped to (argparse would use the terminal's width).
WIDTH = 100

HEADER = """# `catdask` command reference

Generated from the parser (`catdask/cli/parser.py`) by `python -m catdask.cli.reference >
docs/cli.md`; `tests/cli/test_cli_reference.py` fails when this page and the parser differ.
Each section is the command's `--help`. The README shows the everyday commands; the user guide
(`docs/user-guide.md`) the workflows they make up.
"""


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def _commands(parser, path=("catdask",)):
    """``(command words, parser)`` for ``parser`` and every subcommand below it, depth first
    in the parser's order."""
    yield path, parser
    for name, sub in _subcommands(parser).items():
        yield from _commands(sub, (*path, name))


def _help_text(parser: argparse.ArgumentParser) -> str:
    fixed = functools.partial(parser.formatter_class, width=WIDTH)
    parser.formatter_class = fixed  # type: ignore[assignment]
    return parser.format_help().rstrip()


def reference() -> str:
    """The Markdown of ``docs/cli.md``."""
    parts = [HEADER]
    commands = list(_commands(build_parser()))
    parts.append("Commands: " + ", ".join(
        f"[`{' '.join(words)}`](#{'-'.join(words)})" for words, _ in commands) + ".\n")
    for words, parser in commands:
        parts.append(f"## {' '.join(words)}\n\n```text\n{_help_text(parser)}\n```\n")
    return "\n".join(parts)


def main() -> None:
    sys.stdout.write(reference())


if __name__ == "__main__":
    main()
