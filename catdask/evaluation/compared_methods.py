"""The methods compared in the paper's tables: category space (ours) and the baselines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..methods import make_estimator, method_name
from . import baselines

#: Category-space stopping tolerance in the protocol (the paper's is 1e-8; see paper_methods).
PROTOCOL_TOL = 1e-6
#: Category-space restarts per fit inside the inner cross-validation (final refit: 5).
SELECT_RESTARTS = 2


@dataclass(frozen=True)
class Method:
    """One dimensionality-reduction method of the comparison."""

    name: str  # ours, e.g. "K-CQS-global"
    #: ``build(n_classes, params, seed) -> estimator``: ``params`` the selected hyper-parameters
    #: (``{"gamma": ...}`` for kernel methods, else empty). The estimator is a transformer, or
    #: (``classifier="angle"``) has ``predict``.
    build: Callable
    classifier: str = "svm"  # a linear SVM on the reduced coordinates, or "angle": own predict
    kernel: bool = False  # select the RBF gamma by inner cross-validation
    paper_column: str | None = None  # the column of the paper's table compared with
    description: str = ""
    #: Builder of the inner cross-validation only (e.g. fewer restarts; None: ``build``); the
    #: final refit, which the test part scores, always uses ``build``.
    select_build: Callable | None = None

    def builder(self, stage):
        """``build`` for the final refit (``stage="final"``); ``select_build`` (if set) for
        the inner cross-validation (``stage="select"``)."""
        if stage == "select" and self.select_build is not None:
            return self.select_build
        return self.build


def paper_methods(*, n_restarts=5, select_restarts=SELECT_RESTARTS, tol=PROTOCOL_TOL,
                  certify=False, max_iter=2000):
    """Every method of the paper's Tables 1-3, plus the variants we add."""
    methods = {}

    def add(m):
        methods[m.name] = m

    def category(kernel, objective, origin, restarts):
        name = method_name(kernel=kernel, objective=objective)

        def build(n_classes, params, seed):
            # classifier="angle": the paper's angle classifier for the ...-A methods.
            common = dict(origin=origin, n_restarts=restarts, tol=tol, max_iter=max_iter,
                          certify=certify, random_state=seed, classifier="angle")
            if kernel:
                common.update(kernel="rbf", gamma=params["gamma"])
            return make_estimator(name, **common)

        return build

    for kernel in (False, True):
        for objective, short in (("quadratic", "CQS"), ("absolute", "CAS")):
            for classifier in ("svm", "angle"):
                for origin in ("global", "class"):
                    angle = "-A" if classifier == "angle" else ""
                    column = ("K-" if kernel else "") + short + angle
                    add(
                        Method(
                            name=f"{column}-{origin}",
                            build=category(kernel, objective, origin, n_restarts),
                            select_build=(
                                None if select_restarts in (None, n_restarts)
                                else category(kernel, objective, origin, select_restarts)
                            ),
                            classifier=classifier,
                            kernel=kernel,
                            paper_column=column,
                            description=(
                                f"{'Kernel (RBF) ' if kernel else ''}category space, "
                                f"{objective} objective, origin={origin!r}, "
                                + ("linear SVM" if classifier == "svm" else "angle classifier")
                            ),
                        )
                    )
    add(Method("PCA", lambda K, p, s: baselines.make_pca(K), paper_column="PCA",
               description="PCA, K components (sklearn PCA)"))
    add(Method("MC-FLD", lambda K, p, s: baselines.make_mcfld(K), paper_column="MC-FLD",
               description="multi-class Fisher, K-1 components (sklearn LDA, solver='svd')"))
    add(Method("LS-LDA", lambda K, p, s: baselines.LeastSquaresLDA(), paper_column="LS-LDA",
               description="least-squares LDA (Ye 2007), K outputs, minimum-norm solution"))
    add(Method("K-PCA", lambda K, p, s: baselines.make_kernel_pca(K, gamma=p["gamma"]),
               kernel=True, paper_column="K-PCA",
               description="kernel PCA (RBF), K components (sklearn KernelPCA)"))
    add(Method("K-MC-FLD",
               lambda K, p, s: baselines.KernelFisherDiscriminant(gamma=p["gamma"]),
               kernel=True, paper_column="K-MC-FLD",
               description="multi-class kernel Fisher (RBF), K-1 components, reg=0.001"))
    return methods

