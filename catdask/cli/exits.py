"""Exit codes of the ``catdask`` command and the error that carries one."""

from __future__ import annotations

EXIT_OK = 0
#: Anything unexpected (a bug, or a failure the CLI does not know how to describe).
EXIT_UNEXPECTED = 1
#: A bad command line: unknown command or option, missing argument, value out of range, an
#: option the chosen method or mode does not use.
EXIT_USAGE = 2
#: Bad input: unknown or unsafe data-set/model name, unreadable file, missing or damaged
#: store, source files not found, unreachable Dask scheduler or Prefect API.
EXIT_INPUT = 3
#: ``train``: the model was not registered because it could not be certified.
EXIT_UNCERTIFIED = 4
#: Interrupted with Ctrl-C.
EXIT_INTERRUPTED = 130
#: Standard output was closed early (e.g. piped into ``head``); the shell's SIGPIPE code.
EXIT_BROKEN_PIPE = 141

EXIT_CODES_HELP = f"""exit codes:
  {EXIT_OK}    success
  {EXIT_UNEXPECTED}    unexpected error (run with -v for the traceback)
  {EXIT_USAGE}    bad command line (unknown option, missing argument, value out of range)
  {EXIT_INPUT}    bad input: unknown or unsafe name, unreadable file, missing or damaged
       store, source files not found, unreachable Dask scheduler or Prefect API
  {EXIT_UNCERTIFIED}    train: model not registered because it could not be certified
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_BROKEN_PIPE}  output closed early (e.g. piped into head)"""


class CliError(Exception):
    """A foreseen failure: ``message`` (what is wrong and, where possible, what to do) printed as
    one line, and the exit ``code`` (:data:`EXIT_USAGE` or :data:`EXIT_INPUT`).
    """

    def __init__(self, message: str, code: int = EXIT_INPUT):
        super().__init__(message)
        self.code = code


def usage_error(message: str) -> CliError:
    """A command-line mistake found after parsing (exit 2, as argparse's own errors)."""
    return CliError(message, EXIT_USAGE)
