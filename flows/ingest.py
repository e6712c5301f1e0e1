"""``flows/ingest.py``: the flows of :mod:`catdask.orchestration.ingest`, run as a script.

The flow lives in :mod:`catdask.orchestration.ingest`. Run it from a checkout:
``python flows/ingest.py iris wine``.
"""

import sys

from catdask.orchestration.ingest import ingest

__all__ = ["ingest"]

if __name__ == "__main__":
    from catdask.orchestration.input_errors import run_as_script

    run_as_script(ingest, sys.argv[1:] or ["iris", "wine"])
