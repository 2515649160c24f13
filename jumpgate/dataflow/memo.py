"""A small thread-safe memo that forgets its least recently used entries.

The control plane remembers work that clients repeat from job to job (an expression's parsed
tree, a join chain's generated C) on the path of every job. `functools.lru_cache` does not fit
those: the key is not always the whole argument list, some values must not be kept (errors,
entries too large), and the owner decides when an entry still holds (a plan's identity)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["BoundedMemo"]


class BoundedMemo(Generic[K, V]):
    """At most `max_entries` values by key; reading an entry makes it the most recent. `get`
    answers None for a key it does not hold, so None is not a value to keep. Jobs are parsed,
    mapped and compiled on worker threads, so every access takes the lock."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"a memo keeps at least one entry, not {max_entries}")
        self.max_entries = max_entries
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
