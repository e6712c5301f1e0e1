"""docs/cli.md is the parser's help, regenerated: it stays current or this test says how."""

from __future__ import annotations

import re

import pytest

from catdask.cli import reference
from catdask.cli.parser import build_parser

from ..helpers.paths import REPO

PAGE = REPO / "docs" / "cli.md"
REGENERATE = "python -m catdask.cli.reference > docs/cli.md"


def _squeezed(text: str) -> str:
    # Compared without whitespace: a Python release or a terminal that wraps or indents help
    # differently (argparse also wraps after a hyphen: ``./catdask-`` / ``store``) must not fail
    # the check, a changed option or help text must.
    return re.sub(r"\s+", "", text)


def test_the_cli_reference_is_the_parsers_help():
    assert PAGE.exists(), f"docs/cli.md is missing; run: {REGENERATE}"
    assert _squeezed(PAGE.read_text(encoding="utf-8")) == _squeezed(reference.reference()), (
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


def test_each_section_is_what_catdask_help_prints(monkeypatch, capsys):
    """Each section is the command's own ``--help`` as a user's terminal shows it (80 columns
    here; the page is wrapped at 100)."""
    monkeypatch.setenv("COLUMNS", "80")
    sections = dict(re.findall(r"^## (catdask[\w ]*)\n\n```text\n(.*?)\n```",
                               PAGE.read_text(encoding="utf-8"), re.S | re.M))
    for words in (words for words, _ in reference._commands(build_parser())):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*words[1:], "--help"])
        printed = capsys.readouterr().out
        section = sections[" ".join(words)]
        assert _squeezed(printed) == _squeezed(section), " ".join(words)
