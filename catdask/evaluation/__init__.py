"""Reproducing the paper's experiments: baselines, protocol, published numbers, reports.

- :mod:`~catdask.evaluation.data`: ``load_xy(name)`` for the paper's UCI data sets.
- :mod:`~catdask.evaluation.baselines`: PCA, MC-FLD, LS-LDA, K-PCA, K-MC-FLD transformers.
- :mod:`~catdask.evaluation.compared_methods`: the compared methods (``paper_methods``).
- :mod:`~catdask.evaluation.protocol`: repeated 2/3 - 1/3 splits, inner-CV selection, SVM or
  angle classifier (``evaluate_method``).
- :mod:`~catdask.evaluation.experiments`: the paper's tables as experiments; ``run_experiment``.
- :mod:`~catdask.evaluation.paper_tables`: the paper's Tables 1-3 as data.
- :mod:`~catdask.evaluation.tables`: CSV / Markdown / JSON tables, ours vs the paper.
- :mod:`~catdask.evaluation.results_io`: read written tables back; merge runs over different
  data sets into one table.
- :mod:`~catdask.evaluation.figures`: the paper's Figures 1-3 (K-CQS vs K-PCA vs K-MC-FLD).

``benchmarks/reproduce_paper.py`` runs all of it.
"""

# The names the evaluation flow and the tests import from the package; everything else is
# imported from its module.
from .data import PAPER_DATASETS
from .experiments import paper_experiments, run_experiment
from .paper_tables import PAPER_TABLES
from .tables import markdown_table, write_experiment

__all__ = [
    "PAPER_DATASETS",
    "PAPER_TABLES",
    "markdown_table",
    "paper_experiments",
    "run_experiment",
    "write_experiment",
]
