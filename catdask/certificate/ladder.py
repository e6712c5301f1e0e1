"""The certificate as an ordered ladder: levels of increasing cost, walked under a budget.

Decisions read the outcomes' fields, never a reason's prose (docs/design.md §4 has the table).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from .budget import CertificateBudget

logger = logging.getLogger("catdask.certificate")

#: The statuses of an :class:`Outcome` (and of a :class:`~.record.Certificate`).
CERTIFIED, REFUTED, GAP, NOT_ATTEMPTED, FAILED = (
    "certified", "refuted", "gap", "not_attempted", "failed")
#: ``Outcome.next`` for "the following level of the ladder" (None: stop here).
NEXT = "next"


@dataclass(frozen=True)
class Outcome:
    """What one level of the ladder found."""

    level: str
    #: ``certified``, ``refuted`` (a better point exists), ``gap`` (a bound, not a proof),
    #: ``not_attempted`` (outside the budget, or not applicable) or ``failed`` (named in note).
    status: str
    #: The upper bound on ``max f`` this level proved, in the test's units (nan if none).
    bound: float = math.nan
    #: The level's own result (a Certificate, a bound's data), for the rendering.
    evidence: Any = None
    #: Which level to try next: a level's name, :data:`NEXT` (the following one) or None.
    next: str | None = NEXT
    #: This level's clause of the reason (for the rendering only; never read to decide).
    note: str = ""


class Level(Protocol):
    """One rung: ``applies`` before anything is spent, ``estimate`` of its size, ``run``."""

    name: str

    def applies(self, budget: CertificateBudget, state: Any) -> bool:
        """Whether the level is to run on this problem under this budget."""

    def estimate(self, budget: CertificateBudget, state: Any) -> dict:
        """Its size (and, where known, seconds) before it runs."""

    def run(self, budget: CertificateBudget, state: Any) -> Outcome:
        """Run it: the outcome, which names the level to try next."""


def climb(ladder: Sequence[Level], budget: CertificateBudget, state: Any) -> list[Outcome]:
    """Walk ``ladder`` from its first level and return the trail."""
    names = [level.name for level in ladder]
    trail: list[Outcome] = []
    at = 0
    while at < len(ladder):
        level = ladder[at]
        if level.applies(budget, state):
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("certificate level %s: %s", level.name,
                             level.estimate(budget, state))
            outcome = level.run(budget, state)
        else:
            outcome = Outcome(level.name, NOT_ATTEMPTED)
        trail.append(outcome)
        if outcome.next is None:
            break
        at = at + 1 if outcome.next == NEXT else names.index(outcome.next)
    return trail
