#!/usr/bin/env python3
"""Rewrite citations of design notes and paper equations to what exists in the repository.

The code once cited two files that lived outside the repository, ``DESIGN.md`` and
``STACK.md``, and the paper's equations by their LaTeX labels (``eq. Ydef``, ``[eq:Zsolquad]``).
This script rewrites, in place:

- ``DESIGN.md`` -> ``docs/design.md``, keeping section references:
  ``DESIGN.md 3c`` -> ``docs/design.md §3c``, ``DESIGN.md section 4`` -> ``docs/design.md §4``,
  ``DESIGN.md sections 2, 3 and 5`` -> ``docs/design.md §2, §3 and §5``;
- ``STACK.md`` -> ``docs/stack.md`` (its headings are kept, so ``STACK.md (Dask)`` still names
  a heading);
- paper equation labels -> printed numbers: ``eq. Ydef``, ``eq:Ydef``, ``[eq:Ydef]``,
  ``eq. (Ydef)``, ``eqs. EquadW2, Rkdef``, ``eqs. LabszeffKKT-zkiksol2`` and lists wrapped over
  lines become ``eq. (17)``, ``eqs. (42), (43)``, ``eqs. (28)-(29)``.

Nothing else is touched. The rewrite is idempotent (rewritten text matches no pattern), so a
second run changes nothing. Unknown ``eq:`` labels and label names left outside any citation
are reported, not guessed.

The printed numbers come from ``category_space.tex`` (document class ``paper``: equations are
numbered 1, 2, ... through the whole paper, never per section; every ``equation`` and every
``eqnarray`` line without ``\\nonumber`` gets a number). The table is embedded below so the script
needs no copy of the paper; ``--tex PATH`` recomputes it from the source and stops if the two
differ. The same table is the appendix of ``docs/design.md``.

Usage::

    python tools/rewrite_citations.py                 # default paths, rewrite in place
    python tools/rewrite_citations.py --dry-run       # report only
    python tools/rewrite_citations.py --dry-run --diff catdask/zstep.py
    python tools/rewrite_citations.py --check         # exit 1 if anything would change (CI)
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections import Counter
from pathlib import Path

#: Paths rewritten when none are given (relative to the repository root).
DEFAULT_PATHS = (
    "catdask",
    "flows",
    "tests",
    "benchmarks",
    "deploy",
    "docs",
    "README.md",
    "pyproject.toml",
    "Makefile",
)
#: Files never rewritten: the notes themselves (the appendix of docs/design.md lists the labels
#: on purpose) and this script.
SKIP_FILES = ("docs/design.md", "docs/stack.md", "tools/rewrite_citations.py")
TEXT_SUFFIXES = {".py", ".md", ".rst", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh"}
TEXT_NAMES = {"Makefile"}
SKIP_DIRS = {"__pycache__", "node_modules", "catdask.egg-info"}
#: Lines a rewrite makes longer than this are reported (not re-wrapped).
MAX_LINE = 100

#: Printed equation number of every ``\label{eq:...}`` in category_space.tex.
EQUATION_NUMBERS = {
    "innerprodmax": 1,
    "wkwlinner": 2,
    "EWZ": 3,
    "EWZ2": 4,
    "sumzequalszero": 5,
    "absvalobj": 6,
    "EWZabs": 7,
    "wkRKHS": 8,
    "wkwlRKHS": 9,
    "orthoRKHS": 10,
    "Kquadobj": 11,
    "Kabsobj": 12,
    "Eequiv": 13,
    "wkwlconstraintsfinal": 14,
    "Lagrangianortho": 15,
    "gradLagrangian": 16,
    "Ydef": 17,
    "lambdasol": 18,
    "lambdasol2": 19,
    "Wsoltmp": 20,
    "lambdasolfinal": 21,
    "Wsolfinal": 22,
    "Equadeff": 23,
    "Zsolquad": 24,
    "Eabseff": 25,
    "Zsolabs": 26,
    "Labseff": 27,
    "LabszeffKKT": 28,
    "zkiksol2": 29,
    "EKequivA": 30,
    "AGAeqIK": 31,
    "Lagrangian_ker": 32,
    "Lagrangian_ker_grad": 33,
    "Ykerdef": 34,
    "lambdakersol": 35,
    "lambdakerfinal": 36,
    "Asolfinal": 37,
    "zksqrkersol": 38,
    "zkabskersol": 39,
    "zkikKabseffsol2": 40,
    "Equadeff2": 41,
    "EquadW2": 42,
    "Rkdef": 43,
    "Lagrangian_quad": 44,
    "RW=00003DSWW1": 45,  # LyX's escape of "RW=SWW1"; (46) and (47) carry no label
    "Rdef": 48,
    "S(w)": 49,
    "1storderneccond": 50,
    "2ndordneccond": 51,
    "EKquadalpha": 53,  # (52) carries no label
    "Gkjm": 54,
    "EKquadnew": 56,  # (55) carries no label
    "Bconstraints": 57,
}

# ----------------------------------------------------------------------------- patterns
# Longest label first, so "EWZ2" is never read as "EWZ" followed by "2".
_LABEL = "(?:{})(?![A-Za-z0-9_])".format(
    "|".join(re.escape(k) for k in sorted(EQUATION_NUMBERS, key=len, reverse=True))
)
# One cited equation: Ydef, (Ydef), [Ydef], eq:Ydef, (eq:Ydef), [eq:Ydef], (\ref{eq:Ydef}).
_ITEM = (
    rf"\(\\ref\{{eq:(?P<l1>{_LABEL})\}}\)"
    rf"|\\ref\{{eq:(?P<l2>{_LABEL})\}}"
    rf"|\[(?:eq:)?(?P<l3>{_LABEL})\]"
    rf"|\((?:eq:)?(?P<l4>{_LABEL})\)"
    rf"|(?:eq:)?(?P<l5>{_LABEL})"
)
_ITEM_RE = re.compile(_ITEM)
# Whitespace that may wrap onto the next line of a comment or docstring.
_WRAP = r"[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?"
# Between two cited equations: ", ", " and ", "-", "--", en dash, " to ", or a line wrap.
_SEP = rf"{_WRAP}(?:,|--?|\u2013|and|to|&)?{_WRAP}(?:and[ \t]+)?"
_ITEMS_NOGROUP = re.sub(r"\?P<l\d>", "?:", _ITEM)
# A citation run: "eq." / "eqs." / "Eq." / "equation(s)" and a list of labels, or a lone
# "eq:label" form with no head.
_RUN_RE = re.compile(
    rf"(?P<head>(?<![A-Za-z])(?:[Ee]qs?\.|[Ee]quations?)){_WRAP}"
    rf"(?P<items>(?:{_ITEMS_NOGROUP})(?:{_SEP}(?:{_ITEMS_NOGROUP}))*)"
)
_LONE_RE = re.compile(
    rf"(?<![A-Za-z0-9_:])(?P<items>\[eq:{_LABEL}(?:[ \t]*,[ \t]*(?:eq:)?{_LABEL})+\]"
    rf"|(?:\(\\ref\{{eq:{_LABEL}\}}\)|\\ref\{{eq:{_LABEL}\}}"
    rf"|\[eq:{_LABEL}\]|\(eq:{_LABEL}\)|eq:{_LABEL})"
    rf"(?:{_SEP}(?:{_ITEMS_NOGROUP}))*)"
)

_SECTION_ID = r"(?:3[bc]|[1-7])(?![A-Za-z0-9_]|\.\d)"
_NOTE_PREFIX = r"(?<![\w/.-])(?:[\w.~-]*/)*"
_DESIGN_RE = re.compile(
    rf"{_NOTE_PREFIX}DESIGN\.md"
    rf"(?P<sec>(?P<sep>[ \t]*,?[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?)(?P<word>[Ss]ections?[ \t]+|§+[ \t]*)?"
    rf"(?P<ids>{_SECTION_ID}(?:(?:[ \t]*,[ \t]*|[ \t]+and[ \t]+){_SECTION_ID})*))?"
)
_STACK_RE = re.compile(rf"{_NOTE_PREFIX}STACK\.md")
_ID_RE = re.compile(_SECTION_ID)

# Leftovers worth a look after the rewrite.
_UNKNOWN_LABEL_RE = re.compile(r"(?<![A-Za-z0-9_])eq:[A-Za-z0-9_=()]+")
_BARE_LABEL_RE = re.compile(rf"(?<![A-Za-z0-9_/.-]){_LABEL}")


# ----------------------------------------------------------------------------- rewriting
def _number_item(match: re.Match) -> str:
    label = next(g for g in match.group("l1", "l2", "l3", "l4", "l5") if g is not None)
    return f"({EQUATION_NUMBERS[label]})"


def _rewrite_run(match: re.Match) -> str:
    head = match.group("head")
    between = match.string[match.end("head") : match.start("items")]
    items = _ITEM_RE.sub(_number_item, match.group("items"))
    return f"{head}{between}{items}"


def _rewrite_lone(match: re.Match) -> str:
    text = match.group("items")
    if text.startswith("[") and "," in text:  # "[eq:Ydef, eq:Wsolfinal]": one bracketed list
        text = text[1:-1]
    first = _ITEM_RE.match(text)
    numbered = _ITEM_RE.sub(_number_item, text)
    several = _ITEM_RE.search(text, first.end()) is not None
    # A lone "(eq:Ydef)" is a parenthetical citation: keep the parentheses around "eq. (17)".
    if first.group(0).startswith("(eq:") and not several:
        return f"(eq. {numbered})"
    return f"{'eqs.' if several else 'eq.'} {numbered}"


def _rewrite_design(match: re.Match) -> str:
    if match.group("sec") is None:
        return "docs/design.md"
    sep, word, ids = match.group("sep"), match.group("word"), match.group("ids")
    if word is None and ("\n" in sep or "," in sep or sep == ""):
        # "DESIGN.md, 3 restarts" or a number on the next line: not a section reference.
        return "docs/design.md" + match.group("sec")
    return "docs/design.md" + sep + _ID_RE.sub(lambda m: "§" + m.group(0), ids)


def rewrite_text(text: str) -> tuple[str, Counter]:
    """Return ``text`` with every citation rewritten, and the count of each kind."""
    counts: Counter = Counter()
    text, counts["DESIGN.md"] = _DESIGN_RE.subn(_rewrite_design, text)
    text, counts["STACK.md"] = _STACK_RE.subn("docs/stack.md", text)
    text, n_runs = _RUN_RE.subn(_rewrite_run, text)
    text, n_lone = _LONE_RE.subn(_rewrite_lone, text)
    counts["equation"] = n_runs + n_lone
    return text, +counts


def leftovers(text: str) -> list[str]:
    """Lines that still look like label citations (unknown labels, labels outside a citation)."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if _UNKNOWN_LABEL_RE.search(line) or _BARE_LABEL_RE.search(line):
            found.append(f"{lineno}: {line.strip()}")
    return found


def grown_long_lines(old: str, new: str) -> list[str]:
    """Lines longer than MAX_LINE after the rewrite that were not that long before."""
    before = set(old.splitlines())
    return [
        f"{n}: {len(line)} chars"
        for n, line in enumerate(new.splitlines(), 1)
        if len(line) > MAX_LINE and line not in before
    ]


#: (before, after) pairs checked by ``--self-test``; each "after" must also be a fixed point.
SELF_TEST = (
    ("(paper eq. Ydef)", "(paper eq. (17))"),
    ("eqs. EquadW2, Rkdef; DESIGN.md section 4)", "eqs. (42), (43); docs/design.md §4)"),
    ("eqs. LabszeffKKT-zkiksol2, DESIGN.md 3c", "eqs. (28)-(29), docs/design.md §3c"),
    ("eqs. (innerprodmax),\n    (Wsolfinal).", "eqs. (1),\n    (22)."),
    ("paper eq.\n  # Rkdef)", "paper eq.\n  # (43))"),
    ("eqs. EquadW2, 1storderneccond and Rapcs", "eqs. (42), (50) and Rapcs"),
    ("CQS [eq:Zsolquad]: z", "CQS eq. (24): z"),
    ("[eq:Ydef, eq:Wsolfinal]", "eqs. (17), (22)"),
    ("(eq:EWZ2) and eq:EWZ; (eq:EWZ)", "eqs. (4) and (3); (eq. (3))"),
    ("eq. (1) and eq. 1", "eq. (1) and eq. 1"),
    ("(DESIGN.md)", "(docs/design.md)"),
    ("DESIGN.md sections 2, 3 and 5.", "docs/design.md §2, §3 and §5."),
    ("DESIGN.md section 4, 3c; DESIGN.md section 4, (b)", "docs/design.md §4, §3c; docs/design.md §4, (b)"),
    ("DESIGN.md\n# section 4 x", "docs/design.md\n# §4 x"),
    ("DESIGN.md, 3 restarts", "docs/design.md, 3 restarts"),
    ("/work/shared/docs/STACK.md (Dask)", "docs/stack.md (Dask)"),
    ("Ydef; eq:unknown", "Ydef; eq:unknown"),
)


def self_test() -> int:
    failures = 0
    for before, after in SELF_TEST:
        got, _ = rewrite_text(before)
        again, n_again = rewrite_text(got)
        if got != after or again != got or n_again:
            failures += 1
            print(f"FAIL {before!r}: got {got!r}, expected {after!r}, second run {again!r}")
    print(f"self-test: {len(SELF_TEST) - failures}/{len(SELF_TEST)} passed")
    return 1 if failures else 0


# ----------------------------------------------------------------------------- files
def iter_files(paths, root: Path):
    for p in paths:
        path = (root / p) if not Path(p).is_absolute() else Path(p)
        if not path.exists():
            print(f"skip (missing): {p}", file=sys.stderr)
            continue
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for f in candidates:
            if not f.is_file():
                continue
            rel = f.resolve().relative_to(root.resolve()).as_posix() if f.resolve().is_relative_to(
                root.resolve()
            ) else f.as_posix()
            parts = Path(rel).parts
            if any(part.startswith(".") or part in SKIP_DIRS for part in parts[:-1]):
                continue
            if rel in SKIP_FILES:
                continue
            if f.suffix in TEXT_SUFFIXES or f.name in TEXT_NAMES:
                yield f, rel


def read_tex_numbers(tex_path: Path) -> dict[str, int]:
    """Printed numbers of ``\\label{eq:...}`` in a LaTeX source numbered 1, 2, ... throughout."""
    tex = re.sub(r"(?<!\\)%.*", "", tex_path.read_text(encoding="latin-1"))
    numbers, n = {}, 0
    env_re = re.compile(r"\\begin\{(equation\*?|eqnarray\*?)\}(.*?)\\end\{\1\}", re.S)
    for m in env_re.finditer(tex):
        env, body = m.groups()
        if env.endswith("*"):
            continue
        if env == "equation":
            rows = [body]
        else:  # eqnarray: one number per row (\\ outside nested arrays) without \nonumber
            rows, depth, cur = [], 0, ""
            for tok in re.split(r"(\\begin\{array\}|\\end\{array\}|\\\\)", body):
                depth += (tok == "\\begin{array}") - (tok == "\\end{array}")
                if tok == "\\\\" and depth == 0:
                    rows.append(cur)
                    cur = ""
                else:
                    cur += tok
            rows.append(cur)
        for row in rows:
            if env != "equation" and ("\\nonumber" in row or "\\notag" in row):
                continue
            n += 1
            for label in re.findall(r"\\label\{eq:([^}]*)\}", row):
                numbers[label] = n
    return numbers


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help=f"files or folders (default: {DEFAULT_PATHS})")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    parser.add_argument("--dry-run", action="store_true", help="report, do not write")
    parser.add_argument("--check", action="store_true", help="like --dry-run; exit 1 on changes")
    parser.add_argument("--diff", action="store_true", help="print a unified diff per file")
    parser.add_argument("--tex", type=Path, help="verify the embedded table against this source")
    parser.add_argument("--self-test", action="store_true", help="run the built-in examples")
    args = parser.parse_args(argv)

    if args.self_test:
        return self_test()
    if args.tex is not None:
        computed = read_tex_numbers(args.tex)
        if computed != EQUATION_NUMBERS:
            diff = set(computed.items()) ^ set(EQUATION_NUMBERS.items())
            print(f"equation table differs from {args.tex}: {sorted(diff)}", file=sys.stderr)
            return 2
        print(f"equation table matches {args.tex} ({len(computed)} labels)")

    root = Path(args.root)
    write = not (args.dry_run or args.check)
    total: Counter = Counter()
    changed_files = 0
    for f, rel in iter_files(args.paths or DEFAULT_PATHS, root):
        try:
            old = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new, counts = rewrite_text(old)
        for line in leftovers(new):
            print(f"  check {rel}:{line}")
        if new == old:
            continue
        changed_files += 1
        total += counts
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"{rel}: {summary}")
        if rel.endswith(".py"):
            for line in grown_long_lines(old, new):
                print(f"  long {rel}:{line}")
        if args.diff:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"
                )
            )
        if write:
            f.write_text(new, encoding="utf-8")
    action = "rewrote" if write else "would rewrite"
    summary = ", ".join(f"{k} {v}" for k, v in sorted(total.items())) or "nothing"
    print(f"{action} {changed_files} file(s): {summary}")
    return 1 if (args.check and changed_files) else 0


if __name__ == "__main__":
    sys.exit(main())
