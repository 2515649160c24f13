"""Where a request's files are looked up: the data root, behind an interface a remote host can
answer (an SSH host's, a pod's volume), so that parsing a request never needs the control plane's
own disk. `dataflow.paths` applies the contract's rules (relative paths, no `..`, containment,
globs, each file once) and asks a `Storage` only the facts; `LocalStorage` answers them from a
directory of this machine."""
from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What the rules need to know of one path under the data root."""

    real: str  # absolute and symlink-free
    inside: bool  # `real` is inside the data root
    exists: bool
    is_file: bool
    size: int = 0
    # Where the file is, for a storage that spans nodes (deploy/fleet.py): the names of the nodes
    # that hold it at `real`. Empty: wherever the NCAs run (one data root for all).
    holders: tuple[str, ...] = ()


class Storage(Protocol):
    def stat(self, relative: str) -> FileFacts:
        """Facts about `relative` (already checked to be relative, without `..`)."""
        ...

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching `pattern` (Python glob syntax, `**` recursive), sorted."""
        ...


def glob_with_facts(storage: Storage, pattern: str) -> list[tuple[str, FileFacts]]:
    """`storage.glob(pattern)` with each match's facts: in one question where the storage can
    answer it so (`glob_stat`: a remote data root in one round trip rather than one per file),
    else a `stat` per match."""
    ask = getattr(storage, "glob_stat", None)
    if ask is not None:
        return ask(pattern)
    return [(m, storage.stat(m)) for m in storage.glob(pattern)]


class LocalStorage:
    """A data root on this machine."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))
        self._root = str(self.root)
        self._prefix = self._root.rstrip("/") + "/"

    def stat(self, relative: str) -> FileFacts:
        return self._facts(os.path.realpath(os.path.join(self._root, relative)))

    def glob_stat(self, pattern: str) -> list[tuple[str, FileFacts]]:
        # The matches of a glob mostly share their directories: each directory's real path is
        # found once, and a match that is not itself a symlink is that plus its name (what
        # realpath would find with a lstat per component of every match).
        dirs: dict[str, str] = {}
        out = []
        for match in self.glob(pattern):
            parent, name = os.path.split(os.path.join(self._root, match))
            if parent not in dirs:
                dirs[parent] = os.path.realpath(parent)
            real = os.path.join(dirs[parent], name)
            try:
                plain = name not in ("", ".", "..") and not stat.S_ISLNK(os.lstat(real).st_mode)
            except OSError:
                plain = False
            out.append((match, self._facts(real if plain else os.path.realpath(real))))
        return out

    def _facts(self, real: str) -> FileFacts:
        """Facts of `real`, absolute and symlink-free. One stat: a request's parse asks this of
        each of its files."""
        if not (real == self._root or real.startswith(self._prefix)):
            # Nothing is revealed about files outside: their existence is not even looked at.
            return FileFacts(real, False, False, False)
        try:
            st = os.stat(real)
        except OSError:
            return FileFacts(real, True, False, False)
        is_file = stat.S_ISREG(st.st_mode)
        return FileFacts(real, True, True, is_file, st.st_size if is_file else 0)

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern, root_dir=self.root, recursive=True))
