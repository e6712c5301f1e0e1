"""Deployment entry point: ``flows/ingest.py:ingest``.

The flow lives in :mod:`catdask.orchestration.ingest`. Run it from a checkout:
``python flows/ingest.py iris wine``.
"""

import sys

from catdask.orchestration.ingest import ingest

__all__ = ["ingest"]

if __name__ == "__main__":
    print(ingest(sys.argv[1:] or ["iris", "wine"]))
