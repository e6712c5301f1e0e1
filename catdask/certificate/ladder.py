"""The certificate as an ordered ladder: levels of increasing cost, walked under a budget.

Every level has the same small interface (:class:`Level`): whether it ``applies`` to this
problem under this budget, an ``estimate`` of its size before it runs, and ``run``, which
returns an :class:`Outcome`: a status, the bound it proved, its evidence and which level to
try next. :func:`climb` walks a ladder and returns the trail of outcomes; the caller renders
the certificate (its reason text included) from that trail once. No code decides anything by
reading a reason's prose: decisions read the outcomes' fields.

The ladders (docs/design.md §4 has their table): the linear test's in :mod:`.levels`
(SDP dual, cheap bound, full SDP, subspace dual, projected subgradient, moment), the kernel
test's in :mod:`.kernel` (probe, low-rank rounds with lifts, exact factor). A new relaxation
is one more class with this interface, placed in its ladder's tuple where it belongs.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from .budget import CertificateBudget

logger = logging.getLogger("catdask.certificate")

__all__ = ["CERTIFIED", "FAILED", "GAP", "NEXT", "NOT_ATTEMPTED", "REFUTED", "Level", "Outcome",
           "climb"]

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
    """Walk ``ladder`` from its first level and return the trail.

    A level that does not apply is passed over (``not_attempted``, recorded); the walk goes
    where each outcome's ``next`` says and ends at None or past the last level. With the
    ``catdask.certificate`` logger at DEBUG, each level's estimate is logged before it runs.
    """
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
