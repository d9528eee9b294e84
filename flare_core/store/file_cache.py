"""What was read from a run's files, kept while the file stays the same.

A dashboard page reads the same files of a run on every rerun of every session (the manifest alone some
forty times a page with the run picker's fifty runs). :class:`FileCache` keeps the value read from a file
under its path and the reading function, with the file's modification time (ns), size and inode at that
moment; a later read gives the same object while a fresh ``stat`` shows the same three, and reads again
when any of them changed. Every write of the store renames a new file into place, so the next write
after a read always changes the inode; the time alone may not, when two writes fall within one tick of
the file system's clock. Only what a file holds is kept: whether a session may read it is for the caller to
decide, before every read.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def file_stamp(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(mtime_ns, size, inode)`` of ``path`` now; ``FileNotFoundError`` when there is none."""
    info = os.stat(path)
    return info.st_mtime_ns, info.st_size, info.st_ino


class FileCache:
    """Values read from files, at most ``max_entries`` of them (the least recently used go first); safe
    to share between threads. The values are shared too: a caller must not change one it was given."""

    def __init__(self, max_entries: int = 512) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, Any], tuple[tuple[int, int, int], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, path: str | os.PathLike, read: Callable[[Path], T]) -> T:
        """``read(path)``, or the value it gave for the file as it is now. What ``read`` raises is raised
        and nothing is kept."""
        stamp = file_stamp(path)
        key = (os.fspath(path), read)
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None and kept[0] == stamp:
                self._entries.move_to_end(key)
                return kept[1]
        value = read(Path(path))
        with self._lock:
            self._entries[key] = (stamp, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
