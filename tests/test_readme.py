"""The README's claims run: its estimator example executes and gives what its comments say, its
commands are real commands, and the links in it and in docs/ lead to files that exist."""

from __future__ import annotations

import re
import shlex

import pytest

from .helpers.paths import REPO

README = REPO / "README.md"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no section '## {title}'"
    return match.group(1)


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 180, f"README.md has {lines} lines; the rest belongs in docs/user-guide.md"


def test_the_estimator_example_runs_and_says_what_it_gives(capsys):
    (code,) = _blocks(_section("The estimators"), "python")
    assert len(code.splitlines()) <= 16
    namespace: dict = {}
    exec(compile(code, "README.md (The estimators)", "exec"), namespace)  # noqa: S102
    assert abs(namespace["accuracy"] - 0.97) < 0.01  # "about 0.97"
    assert namespace["coords"].shape == (178, 3)  # "(178, 3)"
    certificate = namespace["certificate"]
    assert certificate.certified and certificate.method == "sdp-dual"
    assert namespace["kernel"][-1].certificate_.certified
    assert "certified=True" in capsys.readouterr().out


def test_the_quick_start_commands_are_make_targets():
    (commands,) = _blocks(_section("Quick start"), "bash")
    targets = [line.split()[1] for line in commands.splitlines() if line.startswith("make ")]
    assert targets == ["demo", "test"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no target {target}"


def test_the_cli_commands_parse():
    """Each ``catdask ...`` line of the README is accepted by the parser as written (running
    them end to end is the CLI tests' job: ingest, train, models show and predict are each
    tested there on a real store)."""
    from catdask.cli.parser import build_parser

    shown = [line.split("#")[0] for block in _blocks(_section("Ingest, train, predict"), "bash")
             for line in block.splitlines() if line.startswith("catdask ")]
    assert len(shown) == 4
    parser = build_parser()
    for line in shown:
        args = parser.parse_args(shlex.split(line)[1:])
        assert args.command in {"ingest", "train", "models", "predict"}, line


DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings (code blocks left out: their ``#`` lines are not
    headings)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
            for title in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_lead_to_existing_files_and_headings(document):
    text = document.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path, _, anchor = target.partition("#")
        if re.match(r"[a-z]+:", path):  # a URL
            continue
        linked = (document.parent / path) if path else document
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(
                linked.read_text(encoding="utf-8")):
            broken.append(target)
    assert broken == [], f"{document.name}: links to missing files or headings: {broken}"
