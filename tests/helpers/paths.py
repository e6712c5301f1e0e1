"""Where the checkout and the ``../shared`` folder beside it are (imported by tests and helpers)."""

from __future__ import annotations

from pathlib import Path

#: The root of the checkout under test (the folder holding ``catdask/`` and ``tests/``).
REPO = Path(__file__).resolve().parents[2]
#: ``../shared`` beside the checkout: the UCI files and the paper; may be absent.
SHARED = REPO.parent / "shared"
