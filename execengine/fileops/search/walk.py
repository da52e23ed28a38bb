"""The pure-Python file walk: the same files ripgrep visits with our flags.

Depth first, names sorted (code point order, which is UTF-8 byte order, as ``rg --sort
path``); hidden files included; symlinks below the root not followed; names in
:data:`SKIPPED_NAMES` skipped; ``.gitignore`` files of the root's ancestors and of every
visited folder honoured (deeper files win, last matching line wins, an ignored folder is not
entered so nothing inside it can be re-included).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from execengine.confine.files import checked_open, open_binary
from execengine.errors import FileOpError
from execengine.fileops.search.globs import IgnoreRule, ignore_verdict, parse_gitignore
from execengine.fileops.search.query import SKIPPED_NAMES

Layer = tuple[str, list[IgnoreRule]]  # (folder, rules of its .gitignore)
_SKIPPED = frozenset(SKIPPED_NAMES)


def _rules_in(folder: str) -> list[IgnoreRule]:
    try:
        with open_binary(os.path.join(folder, ".gitignore")) as fh:  # verified if confined
            return parse_gitignore(fh.read().decode("utf-8", errors="replace"))
    except (OSError, FileOpError):
        return []


def _ancestor_layers(folder: str) -> list[Layer]:
    layers: list[Layer] = []
    current = os.path.dirname(folder)
    while True:
        rules = _rules_in(current)
        if rules:
            layers.append((current, rules))
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    layers.reverse()
    return layers


def _ignored(layers: list[Layer], path: str, is_dir: bool) -> bool:
    for folder, rules in reversed(layers):
        rel = os.path.relpath(path, folder).replace(os.sep, "/")
        verdict = ignore_verdict(rules, rel, is_dir)
        if verdict is not None:
            return verdict
    return False


def walk_files(root: Path) -> Iterator[str]:
    """Absolute paths of the searchable files under ``root`` (or ``root`` itself)."""
    top = os.path.abspath(root)
    if not os.path.isdir(top):
        if os.path.isfile(top):
            yield top
        return
    base = _ancestor_layers(top)
    rules = _rules_in(top)
    yield from _walk(top, [*base, (top, rules)] if rules else base)


def _walk(folder: str, layers: list[Layer]) -> Iterator[str]:
    try:
        fd = checked_open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except (OSError, FileOpError):
        return  # unreadable, or (confined) a folder that is not where its path said
    try:
        names = sorted(os.listdir(fd))
    except OSError:
        return
    finally:
        os.close(fd)
    for name in names:
        if name in _SKIPPED:
            continue
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        if _ignored(layers, path, is_dir):
            continue
        if is_dir:
            rules = _rules_in(path)
            yield from _walk(path, [*layers, (path, rules)] if rules else layers)
        elif stat.S_ISREG(st.st_mode):
            yield path
