"""A fit with Dask input at the top level of a script without the ``__main__`` guard: the
embedded cluster's worker processes import the script again (Python's spawn) and reach the
fit. The worker says so in one line and stops; the driver's start error names the guard.
"""

from __future__ import annotations

import sys
from types import FrameType


#: Why a script's fit must sit under ``if __name__ == "__main__":`` (said in both processes).
SPAWN_GUARD_HINT = ("the local Dask cluster's worker processes start by importing your script "
                    "again (Python's spawn), so a fit at its top level runs again in each of "
                    "them: put the code that fits under `if __name__ == \"__main__\":`, as "
                    "with multiprocessing")


def importing_main_in_a_child() -> bool:
    """True while a process that multiprocessing's spawn started imports the parent's script
    (run as ``__mp_main__``, which is what makes the ``__main__`` guard work): a worker that
    reached a fit at the script's top level. Read from the calling frames, the one reliable
    sign (in a Dask worker, ``sys.modules["__main__"]`` and ``parent_process()`` say nothing)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == "__mp_main__":
            return True
        frame = frame.f_back
    return False


def started_with_hint(start):
    """``start()``, the cluster's start; when its worker processes fail to start and this is a
    script, the error says the likely reason (a fit at the script's top level)."""
    try:
        return start()
    except RuntimeError as exc:
        if "failed to start" not in str(exc) or not getattr(sys.modules.get("__main__"),
                                                              "__file__", None):
            raise
        raise RuntimeError(f"{exc} Likely reason: {SPAWN_GUARD_HINT}.") from exc
