"""The ``catdask`` command line: ingest, train, evaluate, models, plot, check, serve, demo.

Modules: :mod:`.parser` (options and help), :mod:`.checks` (argument checks that run before
any heavy import), :mod:`.runtime` (Prefect's environment, the scheduler check, the console set-up
for flow runs, the Dask client), :mod:`.flow_commands`, :mod:`.store_commands` and
:mod:`.demo` (the commands), :mod:`.output` (JSON, tables, progress), :mod:`.exits` (exit
codes), :mod:`.main` (dispatch and error handling).

Exit codes: 0 success; 1 unexpected; 2 bad command line; 3 bad input, store problem, missing
source files, unreachable scheduler or Prefect API; 4 model not certified (not registered); 130
interrupted; 141 output closed early.
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
