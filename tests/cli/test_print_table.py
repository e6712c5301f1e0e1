"""print_table draws the box rich's Table drew (the expected tables are rich's output)."""

from __future__ import annotations

import io
import sys

from catdask.cli.output import print_table


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_table_in_a_pipe_is_rich_s_box_without_escapes(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    print_table([{"a": 1, "bb": "x", "c": None}, {"a": 22, "bb": 1.23456, "c": "zz"},
                 {"a": "3\n4", "bb": "", "c": ""}])
    assert capsys.readouterr().out == (
        "┏━━━━┳━━━━━━┳━━━━┓\n"
        "┃ a  ┃ bb   ┃ c  ┃\n"
        "┡━━━━╇━━━━━━╇━━━━┩\n"
        "│ 1  │ x    │    │\n"
        "│ 22 │ 1.23 │ zz │\n"
        "│ 3  │      │    │\n"
        "│ 4  │      │    │\n"
        "└────┴──────┴────┘\n")


def test_the_wrap_column_wraps_at_spaces_to_fit_and_long_words_are_cut(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    print_table([{"name": "n1", "description": "short " + "x" * 70 + " tail"}],
                wrap="description")
    assert capsys.readouterr().out == (
        "┏━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n"
        "┃ name ┃ description                             ┃\n"
        "┡━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n"
        "│ n1   │ short                                   │\n"
        "│      │ xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx │\n"
        "│      │ xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx tail    │\n"
        "└──────┴─────────────────────────────────────────┘\n")
    monkeypatch.setenv("COLUMNS", "40")  # not at hyphens, unlike textwrap
    print_table([{"name": "n1", "description": "see 2026-12-01T22:53:05+00:00 and "
                  "well-known-hyphenated-words here ok"}], wrap="description")
    assert capsys.readouterr().out.splitlines()[3:7] == [
        "│ n1   │ see 2026-12-01T22:53:05+00:00 │",
        "│      │ and                           │",
        "│      │ well-known-hyphenated-words   │",
        "│      │ here ok                       │"]


def test_wide_characters_keep_the_box_straight(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    print_table([{"model": "模型:v1", "status": "ok"}, {"model": "m:v2", "status": "ok"}])
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == "│ 模型:v1 │ ok     │" and lines[4] == "│ m:v2    │ ok     │"


def test_on_a_terminal_only_the_header_is_bold(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(sys, "stdout", _Terminal())
    print_table([{"a": 1, "bb": "x"}])
    lines = sys.stdout.getvalue().splitlines()
    assert lines[1] == "┃\x1b[1m a \x1b[0m┃\x1b[1m bb \x1b[0m┃"
    assert "\x1b" not in "".join(lines[:1] + lines[2:])
