"""Resolving a read's `path` inside the server's data root (contract §1, `read`).

A request may only name files under the data root: entries must be relative, contain no `..`
component, and resolve (after following every symlink) to a regular file inside the real data
root. An entry containing `*`, `?` or `[` is a glob (Python `glob` syntax, `**` recursive; `[[]`
matches a literal `[`); its matches are sorted, and one that matches nothing is an error. A file
named twice (directly, through a glob or through a symlink) is an error, so no file is read twice.
The result holds absolute, symlink-free paths.
"""
from __future__ import annotations

import glob
import os
from pathlib import Path, PurePosixPath

from ..errors import RequestError
from .jsonshape import at, json_type, show

GLOB_CHARS = frozenset("*?[")


def resolve_read_paths(spec: object, data_root: Path, path: str) -> tuple[str, ...]:
    """Check and resolve `path` of a read (a string or a list of strings) against `data_root`."""
    if isinstance(spec, str):
        entries = [(spec, path)]
    elif isinstance(spec, list):
        if not spec:
            raise RequestError("'path' must not be an empty list", path)
        entries = []
        for i, item in enumerate(spec):
            if not isinstance(item, str):
                raise RequestError(f"a path must be a string, got {json_type(item)}", at(path, i))
            entries.append((item, at(path, i)))
    else:
        raise RequestError(f"'path' must be a string or a list of strings, got {json_type(spec)}", path)

    root = Path(os.path.realpath(data_root))
    resolved: list[str] = []
    named_by: dict[str, str] = {}
    for entry, entry_path in entries:
        _check_relative(entry, entry_path)
        if GLOB_CHARS.intersection(entry):
            files = _expand_glob(entry, root, entry_path)
        else:
            files = [(entry, _resolve_file(entry, root, entry_path))]
        for spelled, real in files:
            if real in named_by:
                raise RequestError(f"file {show(spelled)} is named twice (also as {show(named_by[real])}); "
                                   "each file may be read once", entry_path, entry)
            named_by[real] = spelled
            resolved.append(real)
    return tuple(resolved)


def _check_relative(entry: str, path: str) -> None:
    if not entry.strip():
        raise RequestError("a path must not be empty", path)
    if "\x00" in entry:
        raise RequestError("a path must not contain NUL characters", path)
    pure = PurePosixPath(entry)
    if pure.is_absolute() or entry.startswith("~"):
        raise RequestError(f"path {show(entry)} must be relative to the data root", path, entry)
    if ".." in pure.parts:
        raise RequestError(f"path {show(entry)} must not contain '..'", path, entry)


def _inside(real: Path, root: Path) -> bool:
    return real == root or real.is_relative_to(root)


def _resolve_file(entry: str, root: Path, path: str) -> str:
    real = Path(os.path.realpath(root / entry))
    # Containment is checked before existence, so nothing is revealed about files outside.
    if not _inside(real, root):
        raise RequestError(f"path {show(entry)} resolves outside the data root (through a symlink)",
                           path, entry)
    if not real.exists():
        raise RequestError(f"file {show(entry)} does not exist in the data root", path, entry)
    if not real.is_file():
        raise RequestError(f"path {show(entry)} is not a regular file", path, entry)
    return str(real)


def _expand_glob(pattern: str, root: Path, path: str) -> list[tuple[str, str]]:
    matches = sorted(glob.glob(pattern, root_dir=root, recursive=True))
    files: list[tuple[str, str]] = []
    for match in matches:
        real = Path(os.path.realpath(root / match))
        if not _inside(real, root):
            # Name the match only if it was listed inside the root: never list an outside directory.
            listed_inside = _inside(Path(os.path.realpath((root / match).parent)), root)
            what = show(match) if listed_inside else "a file"
            raise RequestError(f"glob {show(pattern)} matches {what}, which resolves outside "
                               "the data root (through a symlink)", path, pattern)
        if real.is_file():
            files.append((match, str(real)))
    if not files:
        raise RequestError(f"glob {show(pattern)} matches no files in the data root", path, pattern)
    return files
