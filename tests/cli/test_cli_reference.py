"""docs/cli.md is the parser's help, regenerated: it stays current or this test says how."""

from __future__ import annotations

import re

from catdask.cli import reference
from catdask.cli.parser import build_parser

from ..helpers.paths import REPO

PAGE = REPO / "docs" / "cli.md"
REGENERATE = "python -m catdask.cli.reference > docs/cli.md"


def _words(text: str) -> list[str]:
    # Compared word by word: a Python release that wraps or indents help differently must not
    # fail the check, a changed option or help text must.
    return re.sub(r"\s+", " ", text).strip().split(" ")


def test_the_cli_reference_is_the_parsers_help():
    assert PAGE.exists(), f"docs/cli.md is missing; run: {REGENERATE}"
    assert _words(PAGE.read_text(encoding="utf-8")) == _words(reference.reference()), (
        f"docs/cli.md differs from catdask/cli/parser.py's help; run: {REGENERATE}")


def test_the_reference_has_every_command_and_option():
    """Every subcommand, nested ones included, gets a section, and each section lists every
    option its parser accepts (so the page is the whole CLI, not a selection)."""
    page = reference.reference()
    sections = dict(re.findall(r"^## (catdask[\w ]*)\n\n```text\n(.*?)\n```", page, re.S | re.M))
    commands = dict(reference._commands(build_parser()))
    assert sorted(sections) == sorted(" ".join(words) for words in commands)
    assert {"catdask models list", "catdask train", "catdask predict"} <= set(sections)
    for words, parser in commands.items():
        text = sections[" ".join(words)]
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, f"{' '.join(words)}: {option} missing from its section"


def test_the_reference_does_not_depend_on_the_terminal_width(monkeypatch):
    wide = reference.reference()
    monkeypatch.setenv("COLUMNS", "40")
    assert reference.reference() == wide
