"""What the CLI prints: JSON and tables on stdout, progress and notes on stderr."""

from __future__ import annotations

import io
import json
import math
import shutil
import sys
import time
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


def table_width() -> int | None:
    """The width a table must fit: ``$COLUMNS`` when set, else the terminal's; None (no limit:
    nothing cut) when stdout is a file or a pipe."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else None


def fitted_columns(rows: list[dict], width: int | None, wrap: str | None = None):
    """``(kept, left_out)``: the columns to print, the rightmost left out first until the
    table fits ``width`` without cutting a cell (the ``wrap`` column may wrap, down to
    :data:`WRAP_MIN_WIDTH`). Callers put the essential columns first; the first is never
    left out."""
    need = {c: max([len(str(c))] + [len(_cell(r[c])) for r in rows]) for c in rows[0]}
    if wrap in need:
        need[wrap] = min(need[wrap], WRAP_MIN_WIDTH)
    kept = list(need)
    left_out: list[str] = []
    # rich's box: one border at each end and " | " between cells (3 per column).
    while width is not None and len(kept) > 1 and sum(need[c] + 3 for c in kept) + 1 > width:
        drop = next((c for c in reversed(kept[1:]) if c != wrap), None)
        if drop is None:
            break
        kept.remove(drop)
        left_out.insert(0, drop)
    return kept, left_out


def print_table(rows: list[dict], *, wrap: str | None = None) -> None:
    """Rows of one shape as a table on stdout; ``(none)`` when there are none."""
    from rich.console import Console
    from rich.table import Table

    if not rows:
        print("(none)")
        return
    width = table_width()
    kept, left_out = fitted_columns(rows, width, wrap)
    table = Table(show_lines=False)
    for col in kept:
        table.add_column(str(col), no_wrap=col != wrap, overflow="fold")
    for r in rows:
        table.add_row(*[_cell(r[c]) for c in kept])
    # Rendered to a string and written here: rich would turn a closed pipe into exit 1.
    tty = sys.stdout.isatty()
    natural = sum(max([len(str(c))] + [len(_cell(r[c])) for r in rows]) + 3 for c in kept) + 1
    buffer = io.StringIO()
    Console(width=width or natural, file=buffer, force_terminal=tty).print(table)
    sys.stdout.write(buffer.getvalue())
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
