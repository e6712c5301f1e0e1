"""``catdask`` entry point: parse, dispatch, and turn every foreseen failure into one line
and an exit code (:mod:`.exits`)."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import signal
import sys
import traceback

from catdask.core.progress import CONSOLE_NOTE, CONSOLE_REPEATED

from . import runtime
from .exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    CliError,
)
from .interrupts import interrupt_handling
from .output import note
from .parser import build_parser


def _command(args):
    from . import demo, export_commands, flow_commands, store_commands

    return {
        "ingest": flow_commands.cmd_ingest,
        "train": flow_commands.cmd_train,
        "evaluate": flow_commands.cmd_evaluate,
        "serve": flow_commands.cmd_serve,
        "demo": demo.cmd_demo,
        "datasets": store_commands.cmd_datasets,
        "check": store_commands.cmd_check,
        "gc": store_commands.cmd_gc,
        "models": store_commands.cmd_models,
        "plot": store_commands.cmd_plot,
        "predict": store_commands.cmd_predict,
        "export": export_commands.cmd_export,
    }[args.command]


def _input_errors():
    """Exceptions that mean bad input (exit 3): catdask's own and the OS's "no such file"."""
    from catdask.errors import CatdaskError

    return (CatdaskError, ValueError, FileNotFoundError, KeyError, NotADirectoryError,
            IsADirectoryError, FileExistsError, PermissionError)


class _ConsoleNotes(logging.Handler):
    """Run log records marked :data:`catdask.core.progress.CONSOLE_NOTE`, as ``catdask <command>:
    message`` lines on the current stderr (:func:`.output.note`, so a replaced stderr is
    followed and a flow's ``log_prints`` does not catch them)."""

    def __init__(self, command: str):
        super().__init__(logging.INFO)
        self.addFilter(lambda record: getattr(record, CONSOLE_NOTE, False))
        self.setFormatter(logging.Formatter(f"catdask {command}: %(message)s"))
        self._shown = set()  # `catdask demo` trains ten models on one cluster: one line

    def emit(self, record):
        try:
            line = self.format(record)
            if line not in self._shown:
                self._shown.add(line)
                note(line)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def _configure_logging(verbose: bool, command: str = "") -> None:
    """Console logging: warnings and errors only, unless ``-v``. The level is set on the console
    handler, not only the root logger, since the ``prefect`` logger is at INFO and propagates;
    Prefect's own API handler on the run loggers keeps the UI's run logs complete.
    """
    runtime.show_tracebacks = verbose
    console = logging.StreamHandler()
    console.setLevel(logging.NOTSET if verbose else logging.WARNING)
    if not verbose:
        # What the command reports in its own words: the flow's "rejected: ... (max_gap=G
        # ...)" warning (train, demo: "not registered: ... pass --max-gap GAP ..."), and a
        # flow's one-line error (every flow command: "catdask ingest: error: ...").
        console.addFilter(lambda record: not getattr(record, CONSOLE_REPEATED, False))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s", handlers=[console])
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ConsoleNotes)]:
        root.removeHandler(handler)  # main() may run more than once in a process (tests)
    if not verbose:
        root.addHandler(_ConsoleNotes(command))
        # distributed logs every worker start and stop at INFO on its own; read when
        # distributed is imported, and inherited by the worker processes
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
        pass


def main(argv=None) -> int:
    """Run ``catdask ARGV``; returns the exit code (argparse exits 2 by ``SystemExit``)."""
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose, args.command)
    # `kill -USR1 <pid>` prints every thread's stack to stderr: where a stuck command waits.
    with contextlib.suppress(OSError, ValueError):  # a stderr without a file (in-process use)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    command = " ".join(filter(None, (args.command, getattr(args, "models_cmd", None))))
    prefix = f"catdask {command}: error:"
    error = None
    try:
        with interrupt_handling(args.verbose):
            code = _command(args)(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at interpreter exit
        return code
    except CliError as exc:
        error, code, message = exc, exc.code, str(exc)
    except _input_errors() as exc:
        error, code = exc, EXIT_INPUT
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - last resort: one line unless -v
        error, code, message = exc, EXIT_UNEXPECTED, f"{type(exc).__name__}: {exc}"
        if not args.verbose:
            message += " (run with -v for the traceback)"
    finally:
        runtime.close_embedded_cluster()
    if args.verbose:
        traceback.print_exception(error)
    print(f"{prefix} {message}", file=sys.stderr)
    return code


def _exit_without_teardown(code: int) -> None:
    """Run the exit handlers, flush, and end the process without the interpreter's teardown: for
    ``catdask serve`` once it has stopped everything it started (tearing down the modules took
    seconds of the stop, and there is nothing left to release).
    """
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run() -> None:
    """Console-script entry point (``catdask = "catdask.cli:run"``)."""
    code = main()
    if runtime.exit_without_teardown:
        _exit_without_teardown(code)
    sys.exit(code)
