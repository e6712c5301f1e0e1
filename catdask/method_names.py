"""The light half of the method registry: the paper's method names and what each one is."""

from __future__ import annotations

from typing import NamedTuple


class MethodName(NamedTuple):
    """What a method is, without its estimator: kernel or linear, and its objective."""

    kernel: bool
    objective: str

    @property
    def paper_name(self):
        """The column name in the paper's tables: ``"CQS"``, ``"CAS"``, ``"K-CQS"``, ``"K-CAS"``."""
        short = "CQS" if self.objective == "quadratic" else "CAS"
        return f"K-{short}" if self.kernel else short

    @property
    def certifiable(self):
        """Whether a global-optimality test exists (the quadratic objective, CQS and K-CQS)."""
        return self.objective == "quadratic"


# Method names as in the paper's tables, lower case (the CLI's and ModelSpec's names).
METHOD_NAMES = {
    "cqs": MethodName(kernel=False, objective="quadratic"),
    "cas": MethodName(kernel=False, objective="absolute"),
    "kcqs": MethodName(kernel=True, objective="quadratic"),
    "kcas": MethodName(kernel=True, objective="absolute"),
}

#: The methods with a kernel (their options: ``gamma``).
KERNEL_METHODS = tuple(m for m, e in METHOD_NAMES.items() if e.kernel)
#: The methods with a global-optimality test (their option: ``certify``).
QUADRATIC_METHODS = tuple(m for m, e in METHOD_NAMES.items() if e.certifiable)
#: The certificate levels a fit may ask for, weakest first: the SDP dual (with Rapcsák's
#: condition), or also the level-2 moment relaxation when the dual is not tight.
CERTIFY_LEVELS = ("dual", "moment")
#: The most restarts one fit may ask for (``n_restarts``, ``--restarts``, the train flow's
#: parameter): the batch's arrays and every pass grow with their number.
MAX_RESTARTS = 1000


def method_name(*, kernel, objective):
    """The registry name of the method with this kernel flag and objective."""
    for name, entry in METHOD_NAMES.items():
        if entry.kernel == bool(kernel) and entry.objective == objective:
            return name
    raise ValueError(
        f"No method with kernel={kernel!r} and objective={objective!r}; "
        "objective must be 'quadratic' or 'absolute'."
    )
