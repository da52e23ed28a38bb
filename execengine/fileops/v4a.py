"""The ``*** Begin Patch`` envelope format some agents emit, read into :class:`FilePatch`.

    *** Begin Patch
    *** Update File: src/app.py
    *** Move to: src/main.py          (optional)
    @@ def handler():                 (optional anchor; the hunk is sought after it)
     context
    -old
    +new
    *** Add File: notes.txt
    +every line starts with +
    *** Delete File: old.txt
    *** End Patch

Hunks carry no line numbers; they are located by their context, in order.
"""

from __future__ import annotations

from execengine.errors import FileOpError
from execengine.fileops.udiff import FilePatch, Hunk

BEGIN = "*** Begin Patch"


def is_v4a(text: str) -> bool:
    return text.lstrip().startswith(BEGIN)


def parse(text: str) -> list[FilePatch]:
    lines = text.replace("\r\n", "\n").strip().split("\n")
    if lines[-1].strip() != "*** End Patch":
        raise FileOpError("malformed patch: '*** Begin Patch' without '*** End Patch'")
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    for number, line in enumerate(lines[1:-1], start=2):
        if line.startswith("*** Update File: "):
            path = line[len("*** Update File: "):].strip()
            current, hunk = FilePatch(path, path), None
            files.append(current)
        elif line.startswith("*** Add File: "):
            current = FilePatch(None, line[len("*** Add File: "):].strip())
            hunk = Hunk("*** Add File", 0, 0, None)
            current.hunks.append(hunk)
            files.append(current)
        elif line.startswith("*** Delete File: "):
            current = FilePatch(line[len("*** Delete File: "):].strip(), None, whole=True)
            hunk = None
            files.append(current)
        elif line.startswith("*** Move to: "):
            if current is None or current.old_path is None:
                raise FileOpError(f"malformed patch: line {number}: '*** Move to' outside "
                                  "an '*** Update File' section")
            current.new_path = line[len("*** Move to: "):].strip()
        elif line.startswith("*** End of File"):
            continue
        elif line.startswith("@@"):
            if current is None or current.old_path is None:
                raise FileOpError(f"malformed patch: line {number}: '@@' outside an "
                                  "'*** Update File' section")
            hunk = Hunk(line, None, None, None, anchor=line[2:].strip() or None)
            current.hunks.append(hunk)
        elif current is None:
            raise FileOpError(f"malformed patch: line {number}: {line[:80]!r} before any "
                              "'*** Update/Add/Delete File:' line")
        else:
            if hunk is None:  # an Update section whose first hunk has no '@@'
                hunk = Hunk("@@", None, None, None)
                current.hunks.append(hunk)
            tag = line[:1] if line[:1] in (" ", "-", "+") else (" " if line == "" else None)
            if tag is None or (current.old_path is None and tag != "+"):
                raise FileOpError(f"malformed patch: line {number}: {line[:80]!r} does not "
                                  "start with ' ', '-' or '+'")
            hunk.lines.append((tag, line[1:]))
    if not files:
        raise FileOpError("malformed patch: no '*** Update/Add/Delete File:' section")
    for fp in files:
        for h in fp.hunks:
            while h.lines and h.lines[-1] == (" ", ""):
                h.lines.pop()
    return files
