"""Reproducing the paper's experiments: baselines, protocol, published numbers, reports."""

# The names the evaluation flow and the tests import from the package; everything else is
# imported from its module.
from .data import PAPER_DATASETS
from .experiments import paper_experiments, run_experiment
from .paper_tables import PAPER_TABLES
from .tables import markdown_table, write_experiment

__all__ = ["PAPER_DATASETS", "PAPER_TABLES", "markdown_table", "paper_experiments",
           "run_experiment", "write_experiment"]
