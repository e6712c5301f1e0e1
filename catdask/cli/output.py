"""What the CLI prints: JSON and tables on stdout, progress and notes on stderr."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import time
import unicodedata
from contextlib import contextmanager


def json_ready(obj):
    """``obj`` with every NaN or infinity (Python or numpy scalar) as None, numpy scalars as
    Python numbers: ``json.dumps`` writes ``NaN``, which is not JSON (``jq`` and browsers
    refuse it; a CAS model's ``gap`` and some metrics are NaN)."""
    if isinstance(obj, dict):
        return {key: json_ready(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(value) for value in obj]
    if type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def print_json(obj) -> None:
    """``obj`` as indented JSON on stdout (strict JSON: NaN and infinities as ``null``)."""
    print(json.dumps(json_ready(obj), indent=2, default=str, allow_nan=False))


#: The narrowest a wrapping column (a description, a problem) is made before columns are
#: left out.
WRAP_MIN_WIDTH = 24


def _cell(value) -> str:
    return "" if value is None else (f"{value:.3g}" if isinstance(value, float) else str(value))


def _width(text: str) -> int:
    """The terminal cells ``text`` takes: two for a wide (East Asian) character."""
    return len(text) if text.isascii() else sum(
        1 + (unicodedata.east_asian_width(ch) in "WF") for ch in text)


def table_width() -> int | None:
    """The width a table must fit: ``$COLUMNS`` when set, else the terminal's; None (no limit:
    nothing cut) when stdout is a file or a pipe."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else None


def fitted_columns(rows: list[dict], width: int | None, wrap: str | None = None):
    """``(kept, left_out)``: the columns to print, the rightmost left out first until the
    table fits ``width`` without cutting a cell (the ``wrap`` column may wrap, down to
    :data:`WRAP_MIN_WIDTH`). Callers put the essential columns first; the first is never
    left out."""
    need = {c: max([_width(str(c))] + [_width(_cell(r[c])) for r in rows]) for c in rows[0]}
    if wrap in need:
        need[wrap] = min(need[wrap], WRAP_MIN_WIDTH)
    kept = list(need)
    left_out: list[str] = []
    # The box: one border at each end and " | " between cells (3 per column).
    while width is not None and len(kept) > 1 and sum(need[c] + 3 for c in kept) + 1 > width:
        drop = next((c for c in reversed(kept[1:]) if c != wrap), None)
        if drop is None:
            break
        kept.remove(drop)
        left_out.insert(0, drop)
    return kept, left_out


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces as rich breaks them: a
    word longer than a line starts a new line and is cut into pieces a line long."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in re.findall(r"\s*\S+\s*", paragraph):
            if line and _width(line + word.rstrip()) > width:
                lines.append(line.rstrip())
                line = ""
            while _width(word.rstrip()) > width:
                lines.append(word[:width])
                word = word[width:]
            line += word
        lines.append(line.rstrip())
    return lines


def print_table(rows: list[dict], *, wrap: str | None = None) -> None:
    """Rows of one shape as a table on stdout; ``(none)`` when there are none. Drawn here in
    the box rich's Table draws by default (a heavy head, cells left-aligned, one space either
    side): rich's Table cost ~1 ms a row, most of ``models list`` on a store of 1,000 model
    versions."""
    if not rows:
        print("(none)")
        return
    width = table_width()
    kept, left_out = fitted_columns(rows, width, wrap)
    cells = [[_cell(r[c]).split("\n") for c in kept] for r in rows]
    widths = [max([_width(str(c))] + [_width(text) for row in cells for text in row[i]])
              for i, c in enumerate(kept)]
    if wrap in kept:  # narrowed to what the box leaves it (not below WRAP_MIN_WIDTH), wrapped
        i = kept.index(wrap)
        room = widths[i] if width is None else width - 1 - sum(w + 3 for w in widths) + widths[i]
        widths[i] = min(widths[i], max(room, WRAP_MIN_WIDTH, _width(str(wrap))))
        for row in cells:
            row[i] = _wrapped("\n".join(row[i]), widths[i])

    def rule(left, middle, right, fill):
        return left + middle.join(fill * (w + 2) for w in widths) + right + "\n"

    def line(bar, texts, on="", off=""):
        return bar + bar.join(f"{on} {t}{' ' * (w - _width(t))} {off}"
                              for t, w in zip(texts, widths)) + bar + "\n"

    # A bold header on a terminal, as rich printed it; no escapes in a file or a pipe.
    bold = sys.stdout.isatty() and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")
    on, off = ("\x1b[1m", "\x1b[0m") if bold else ("", "")
    out = [rule("┏", "┳", "┓", "━"), line("┃", map(str, kept), on, off), rule("┡", "╇", "┩", "━")]
    for row in cells:  # a cell of several lines makes its row as many lines high
        out += [line("│", [cell[n] if n < len(cell) else "" for cell in row])
                for n in range(max(map(len, row)))]
    out.append(rule("└", "┴", "┘", "─"))
    # Written at once to sys.stdout, whose closed pipe main() catches (rich turned it into
    # exit 1).
    sys.stdout.write("".join(out))
    if left_out:
        sys.stdout.flush()  # the note (stderr) after the table, also when both go to one file
        note(f"(left out to fit {width} columns: {', '.join(map(str, left_out))}; a wider "
             "terminal or COLUMNS=200 shows them)")


def note(message: str) -> None:
    """One line for the user on stderr (stdout keeps only the command's result)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def console():
    """A rich console on stderr (notes, warnings, progress)."""
    from rich.console import Console

    return Console(stderr=True)


class _PlainProgress:
    """Progress as log lines on stderr: one when a step starts, one when it ends."""

    def __init__(self, command: str):
        self.command = command
        self._started = {}

    def step(self, description: str, total: int | None = None) -> str:
        self._started[description] = time.perf_counter()
        count = "" if total is None else f" ({total} to do)"
        note(f"catdask {self.command}: {description}{count} ...")
        return description

    def update(self, step: str, description: str) -> None:
        # Written, not print()ed: inside a flow run Prefect turns print() into an INFO log
        # record (log_prints), which the console does not show without -v.
        note(f"catdask {self.command}: {description} ...")

    def advance(self, step: str) -> None:
        pass

    def done(self, step: str, summary: str = "") -> None:
        seconds = time.perf_counter() - self._started.get(step, time.perf_counter())
        tail = f" {summary}" if summary else ""
        note(f"catdask {self.command}: {step}: done in {seconds:.1f} s{tail}")


class _LiveProgress:
    """Progress as a rich display: spinner, description, bar (when counted), elapsed time."""

    live = True

    def __init__(self, progress):
        self._progress = progress
        self._tasks = {}

    def step(self, description: str, total: int | None = None) -> str:
        self._tasks[description] = self._progress.add_task(description, total=total)
        return description

    def update(self, step: str, description: str) -> None:
        self._progress.update(self._tasks[step], description=description)

    def advance(self, step: str) -> None:
        self._progress.advance(self._tasks[step])

    def done(self, step: str, summary: str = "") -> None:
        task = self._tasks[step]
        total = self._progress.tasks[task].total or 1  # an uncounted step shows 1/1 when done
        self._progress.update(task, description=f"{step}{summary and ' ' + summary}", total=total,
                              completed=total)
        self._progress.stop_task(task)


@contextmanager
def progress(command: str, live: bool | None = None):
    """A progress reporter for ``catdask <command>``: yields an object with ``step(description,
    total=None) -> step``, ``update(step, description)``, ``advance(step)`` and ``done(step,
    summary="")``. ``live`` forces the rich display on or off (default: on when stderr is a
    terminal); otherwise plain lines name ``command``.
    """
    if live is None:
        live = sys.stderr.isatty()
    if not live:
        yield _PlainProgress(command)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console(),
                  transient=False) as display:
        yield _LiveProgress(display)
