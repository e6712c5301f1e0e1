"""Exceptions for data, catalog and store problems."""

from __future__ import annotations


class CatdaskError(Exception):
    """Base class of every catdask data/store error."""


class _MessageKeyError(KeyError):
    # KeyError.__str__ returns repr(message), which wraps a sentence in quotes; show it as is.
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidNameError(CatdaskError, ValueError):
    """A data-set, model or array name that is not safe to use as a directory name."""


class CatalogError(CatdaskError, ValueError):
    """The data-set catalog (``data/catalog.json``) is malformed."""


class DatasetNotFoundError(CatdaskError, _MessageKeyError):
    """No data set of that name in the catalog or the store."""


class DatasetExistsError(CatdaskError, ValueError):
    """A data set of that name holds different content and replacing it was not asked for.

    Attributes
    ----------
    name : str
        The data set.
    stored_sha256, new_sha256 : str
        Content checksums of what is stored and of what was to be written.
    """

    #: How a caller of the library replaces the content; the CLI says ``--replace`` instead.
    LIBRARY_REMEDY = "Pass replace=True"

    def __init__(self, name: str, stored_sha256: str, new_sha256: str,
                 remedy: str = LIBRARY_REMEDY):
        self.name = name
        self.stored_sha256 = stored_sha256
        self.new_sha256 = new_sha256
        self.remedy = remedy
        super().__init__(self.describe(remedy))

    def describe(self, remedy: str) -> str:
        """The message, with ``remedy`` (e.g. ``"Pass --replace"``) as the way out."""
        return (f"Data set {self.name!r} already holds different content (sha256 "
                f"{self.stored_sha256}); the new content has sha256 {self.new_sha256}. {remedy} "
                "to replace it; models trained on the old content keep their reference to its "
                "snapshot.")

    def __reduce__(self):
        # Rebuilt from its fields when pickled (Prefect may persist a failed run's exception).
        return type(self), (self.name, self.stored_sha256, self.new_sha256, self.remedy)


class ModelNotFoundError(CatdaskError, _MessageKeyError):
    """No model (or no such version) of that name in the registry."""


class SourceNotFoundError(CatdaskError, FileNotFoundError):
    """The original files of a catalog data set are not available locally."""


class ChecksumMismatchError(CatdaskError, ValueError):
    """A file's sha256 differs from the one recorded in the catalog.

    Attributes
    ----------
    path : str
        The file that was checked.
    expected, actual : str
        Hex sha256 digests.
    """

    def __init__(self, path, expected: str, actual: str, hint: str = ""):
        self.path = str(path)
        self.expected = expected
        self.actual = actual
        msg = f"sha256 mismatch for {self.path}: expected {expected}, got {actual}."
        if hint:
            msg += " " + hint
        super().__init__(msg)


class ParseError(CatdaskError, ValueError):
    """A source file could not be parsed; says which file, which line and what is wrong.

    Attributes
    ----------
    path : str or None
        The file being parsed (None for in-memory sources).
    line : int or None
        1-based line number in that file, when the problem is on one line.
    problem : str
        What is wrong, without the location prefix.
    non_numeric : bool
        The problem is a cell that is not a number (often a label column): callers decide on
        this, never on the prose.
    column : int or None
        The 0-based column of that cell (None for other problems).
    """

    def __init__(self, problem: str, path=None, line: int | None = None, *,
                 non_numeric: bool = False, column: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.problem = problem
        self.non_numeric = non_numeric
        self.column = column
        where = ""
        if self.path is not None:
            where = self.path + (f", line {line}" if line is not None else "") + ": "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + problem)


class StoreCorruptError(CatdaskError, ValueError):
    """A data set or model version in the store is damaged or was edited by hand.

    Attributes
    ----------
    path : str
        The store entry (directory) that failed validation.
    """

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):
        # Rebuilt from its fields when pickled: a Dask worker's read error reaches the driver.
        return type(self), (self.path, self.problem)


class StoreWriteError(CatdaskError, OSError):
    """Writing to the store failed (disk full, permissions, ...)."""

    def __str__(self) -> str:
        # The message is a sentence that names the path; OSError's "[Errno 30] <sentence>:
        # '<path>'" wrapped it in the number and the path again.
        return self.strerror if self.errno is not None and self.strerror else super().__str__()



class ServiceStartError(CatdaskError, OSError):
    """A server (Prefect API, Dask cluster) could not start: port taken, early exit, timeout."""


class ServiceLostError(CatdaskError, OSError):
    """A server catdask started and serves through (the Prefect API of ``catdask serve``)
    exited while in use."""


class SchedulerConnectionError(CatdaskError, ConnectionError):
    """The Dask scheduler the user named (``--scheduler``, ``$CATDASK_SCHEDULER``) did not
    answer as a Dask scheduler. Not retried by the flows: the address is the user's to fix."""


class WorkerEnvironmentError(CatdaskError, RuntimeError):
    """The workers of a user-given Dask scheduler cannot run catdask's tasks as the driver
    would: catdask not importable there, another catdask, dask, distributed, numpy or Python
    than the driver's, or catdask sources rewritten on disk after the worker imported them.
    Not retried: the cluster is the user's to fix."""


class ParameterError(CatdaskError, ValueError):
    """A flow run's parameter that the flow refuses (out of range, or one the method does not
    take), found by the flow's own checks before it reads data or starts a cluster."""


#: Failures a retry cannot fix: bad names and parameters, missing, unparseable or damaged
#: inputs (every catdask input error derives from one of these), no permission.
PERMANENT_ERRORS = (ValueError, TypeError, LookupError, FileNotFoundError, NotADirectoryError,
                    IsADirectoryError, PermissionError)


def is_transient(exc: BaseException) -> bool:
    """True when retrying may help: lost connections, killed workers, timeouts, other I/O
    errors (a full disk may have been cleared). Used by the flows' task retries."""
    return not isinstance(exc, (*PERMANENT_ERRORS, SchedulerConnectionError,
                                WorkerEnvironmentError))
