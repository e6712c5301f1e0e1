"""The certificate's ladder (catdask/certificate/ladder.py): the walk, the levels' estimates,
and the structured outcome that code decides on instead of the reason's prose."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from catdask.certificate import Certificate, certify_global_optimum, not_applicable
from catdask.certificate.budget import CertificateBudget
from catdask.certificate.ladder import GAP, NEXT, NOT_ATTEMPTED, Outcome, climb
from catdask.pipeline.reports import rejection_note

# Two classes: W = [e2, e1] is the global maximiser, [e1, e3] a point the SDP dual leaves open.
TWO_OPTIMA = np.stack([np.diag([3.0, 2.0, 0.0]), np.diag([2.5, 0.0, 1.0])])


class Rung:
    """A level that records its run and goes where it is told."""

    def __init__(self, name, applies=True, next=NEXT):
        self.name, self._applies, self._next = name, applies, next

    def applies(self, budget, state):
        return self._applies

    def estimate(self, budget, state):
        return {"rung": self.name}

    def run(self, budget, state):
        state.append(self.name)
        return Outcome(self.name, GAP, next=self._next)


def test_climb_passes_over_levels_that_do_not_apply_and_follows_next():
    ran = []
    ladder = [Rung("a", next="c"), Rung("b"), Rung("c"), Rung("d", applies=False), Rung("e"),
              Rung("f", next=None), Rung("g")]
    trail = climb(ladder, CertificateBudget(), ran)
    assert ran == ["a", "c", "e", "f"]  # b skipped by a's next, g after f's None
    assert [(o.level, o.status) for o in trail] == [
        ("a", GAP), ("c", GAP), ("d", NOT_ATTEMPTED), ("e", GAP), ("f", GAP)]


@pytest.mark.parametrize("moment", [False, True])
def test_every_linear_level_estimates_its_size_before_it_runs(caplog, moment):
    W = np.eye(3)[:, [0, 2]]  # not the global maximiser: the bound levels run too
    with caplog.at_level(logging.DEBUG, logger="catdask.certificate"):
        cert = certify_global_optimum(TWO_OPTIMA, W, moment=moment)
    logged = [r.getMessage() for r in caplog.records if "certificate level" in r.getMessage()]
    names = [m.split(":")[0].removeprefix("certificate level ") for m in logged]
    assert names[:3] == ["sdp dual", "cheap bound", "full SDP"]
    assert ("moment" in names) == moment and not cert.certified


def test_status_says_what_the_reason_says():
    certified = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]])
    assert certified.certified and certified.status == "certified"
    assert certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [0, 2]]).status == "gap"
    # w_2 = e2 has a better direction, e3, orthogonal to W: an empty nu interval
    assert certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, :2]).status == "refuted"
    refused = certify_global_optimum(np.stack([np.eye(12)] * 3), np.eye(12)[:, :3],
                                     budget=CertificateBudget(max_seconds=1e-9, dense_max_dim=5))
    assert refused.status == "not_attempted" and refused.reason.startswith("not attempted")
    off = certify_global_optimum(TWO_OPTIMA, 2.0 * np.eye(3)[:, :2])  # far off the manifold
    assert off.status == "failed" and not off.certified
    assert not_applicable().status == "not_applicable"
    assert not_applicable("not attempted: too big").status == "not_attempted"


def test_rejection_note_reads_the_status_and_old_records_get_one_from_their_flags():
    assert rejection_note(not_applicable()) == "rejected: no optimality test (CAS)"
    old = not_applicable().to_dict()
    old.pop("status")
    restored = Certificate.from_dict(old)  # a record from before the field
    assert restored.status == "not_attempted"  # its flags cannot tell CAS: the safe reading
    gap = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [0, 2]]).to_dict()
    gap.pop("status")
    assert Certificate.from_dict(gap).status == "gap"
    assert math.isfinite(Certificate.from_dict(gap).upper_bound)


def test_the_level_to_try_next_is_a_field_not_a_phrase():
    """Where the SDP dual leaves a gap and the moment level fits its guard, the certificate
    names it (``next_level``: what the train flow and the CLI read); not where W is proved,
    nor where the budget's guard would refuse it."""
    from catdask.certificate.certifiers import LinearCertifier

    open_gap = LinearCertifier(TWO_OPTIMA).certify(np.eye(3)[:, [0, 2]])
    assert not open_gap.certified and open_gap.next_level == "moment"
    assert LinearCertifier(TWO_OPTIMA).certify(np.eye(3)[:, [1, 0]]).next_level is None
    tight = LinearCertifier(TWO_OPTIMA, budget=CertificateBudget(max_moment_block=2))
    assert tight.certify(np.eye(3)[:, [0, 2]]).next_level is None
