"""Resolving a read's `path` inside the server's data root (contract §1, `read`).

A request may only name files under the data root: entries must be relative, contain no `..`
component, and resolve (after following every symlink) to a regular file inside the real data
root. An entry containing `*`, `?` or `[` is a glob (Python `glob` syntax, `**` recursive; `[[]`
matches a literal `[`); its matches are sorted, and one that matches nothing is an error. A file
named twice (directly, through a glob or through a symlink) is an error, so no file is read twice.
The result holds absolute, symlink-free paths and the files' sizes. The file system is asked
through a `Storage` (dataflow/storage.py): the data root may be on another host.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from ..contract.errors import RequestError
from .jsonshape import at, json_type, show
from .storage import FileFacts, Storage, glob_with_facts

GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class ResolvedFiles:
    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    holders: tuple[tuple[str, ...], ...]  # per file, the nodes that hold it (FileFacts.holders)


def read_path_entries(spec: object, path: str) -> list[tuple[str, str]]:
    """The entries of a read's `path` (a string or a non-empty list of strings), each with its
    JSON path. The request model (dataflow/models.py) checks the field with this too."""
    if isinstance(spec, str):
        return [(spec, path)]
    if not isinstance(spec, list):
        raise RequestError(f"'path' must be a string or a list of strings, got {json_type(spec)}", path)
    if not spec:
        raise RequestError("'path' must not be an empty list", path)
    entries = []
    for i, item in enumerate(spec):
        if not isinstance(item, str):
            raise RequestError(f"a path must be a string, got {json_type(item)}", at(path, i))
        entries.append((item, at(path, i)))
    return entries


def resolve_read_paths(spec: object, storage: Storage, path: str) -> ResolvedFiles:
    """Check and resolve `path` of a read (a string or a list of strings) in `storage`."""
    entries = read_path_entries(spec, path)
    resolved: list[str] = []
    sizes: list[int] = []
    holders: list[tuple[str, ...]] = []
    named_by: dict[str, str] = {}
    for entry, entry_path in entries:
        _check_relative(entry, entry_path)
        if GLOB_CHARS.intersection(entry):
            files = _expand_glob(entry, storage, entry_path)
        else:
            files = [(entry, _resolve_file(entry, storage, entry_path))]
        for spelled, facts in files:
            if facts.real in named_by:
                raise RequestError(f"file {show(spelled)} is named twice (also as {show(named_by[facts.real])}); "
                                   "each file may be read once", entry_path, entry)
            named_by[facts.real] = spelled
            resolved.append(facts.real)
            sizes.append(facts.size)
            holders.append(facts.holders)
    return ResolvedFiles(tuple(resolved), tuple(sizes), tuple(holders))


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


def _resolve_file(entry: str, storage: Storage, path: str) -> FileFacts:
    facts = storage.stat(entry)
    # Containment is checked before existence, so nothing is revealed about files outside.
    if not facts.inside:
        raise RequestError(f"path {show(entry)} resolves outside the data root (through a symlink)",
                           path, entry)
    if not facts.exists:
        raise RequestError(f"file {show(entry)} does not exist in the data root", path, entry)
    if not facts.is_file:
        raise RequestError(f"path {show(entry)} is not a regular file", path, entry)
    return facts


def _expand_glob(pattern: str, storage: Storage, path: str) -> list[tuple[str, FileFacts]]:
    files: list[tuple[str, FileFacts]] = []
    for match, facts in glob_with_facts(storage, pattern):
        if not facts.inside:
            # Name the match only if it was listed inside the root: never list an outside directory.
            parent = str(PurePosixPath(match).parent)
            listed_inside = storage.stat(parent).inside
            what = show(match) if listed_inside else "a file"
            raise RequestError(f"glob {show(pattern)} matches {what}, which resolves outside "
                               "the data root (through a symlink)", path, pattern)
        if facts.is_file:
            files.append((match, facts))
    if not files:
        raise RequestError(f"glob {show(pattern)} matches no files in the data root", path, pattern)
    return files
