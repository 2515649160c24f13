"""Where a request's files are looked up: the data root, behind an interface a remote host can
answer (an SSH host's, a pod's volume), so that parsing a request never needs the control plane's
own disk. `dataflow.paths` applies the contract's rules (relative paths, no `..`, containment,
globs, each file once) and asks a `Storage` only the facts; `LocalStorage` answers them from a
directory of this machine."""
from __future__ import annotations

import glob
import os
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


class LocalStorage:
    """A data root on this machine."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))

    def stat(self, relative: str) -> FileFacts:
        real = Path(os.path.realpath(self.root / relative))
        inside = real == self.root or real.is_relative_to(self.root)
        # Nothing is revealed about files outside: their existence is not even looked at.
        exists = inside and real.exists()
        is_file = exists and real.is_file()
        return FileFacts(str(real), inside, exists, is_file, real.stat().st_size if is_file else 0)

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern, root_dir=self.root, recursive=True))
