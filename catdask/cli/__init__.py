"""The ``catdask`` command line: ingest, train, evaluate, models, plot, check, serve, demo."""

from .exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNCERTIFIED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
)
from .main import main, run
from .parser import build_parser

__all__ = ["main", "run", "build_parser", "EXIT_OK", "EXIT_UNEXPECTED", "EXIT_USAGE",
           "EXIT_INPUT", "EXIT_UNCERTIFIED", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]
