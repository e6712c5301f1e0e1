"""The ``catdask`` command line: ingest, train, evaluate, models, plot, check, serve, demo.

:mod:`.parser` holds the options and help, :mod:`.checks` the argument checks that run before
any heavy import, :mod:`.runtime` Prefect's environment and the service checks, the
``*_commands`` modules and :mod:`.demo` the commands, :mod:`.main` dispatch and error handling;
exit codes are in :mod:`.exits`.
"""

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
