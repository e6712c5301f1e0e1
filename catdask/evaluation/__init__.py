"""Reproducing the paper's experiments: baselines, protocol, published numbers, reports.

``load_xy`` (:mod:`.data`) loads the paper's data sets, :mod:`.baselines` and
:mod:`.compared_methods` are the compared methods, :mod:`.protocol` and :mod:`.experiments` run
the paper's tables (:mod:`.paper_tables` holds its numbers), :mod:`.tables` and
:mod:`.results_io` write and read the results, :mod:`.figures` draws Figures 1-3.
``benchmarks/reproduce_paper.py`` runs all of it.
"""

# The names the evaluation flow and the tests import from the package; everything else is
# imported from its module.
from .data import PAPER_DATASETS
from .experiments import paper_experiments, run_experiment
from .paper_tables import PAPER_TABLES
from .tables import markdown_table, write_experiment

__all__ = ["PAPER_DATASETS", "PAPER_TABLES", "markdown_table", "paper_experiments",
           "run_experiment", "write_experiment"]
