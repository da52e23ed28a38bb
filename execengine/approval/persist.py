"""Adding a pattern description to ``approvals.command_allowlist`` in config.yaml.

The file is edited as text at positions the YAML parser reports, so everything else in it
(comments, ordering, quoting, blank lines) stays byte for byte; the result is validated
with the normal config loader before it atomically replaces the file (temporary file in
the same directory, fsync, ``os.replace``, mode preserved). A missing file is created.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import yaml

from execengine._yamlbound import compose
from execengine.config import parse_config
from execengine.errors import ConfigError

_lock = threading.Lock()


def _item(description: str) -> str:
    return json.dumps(description, ensure_ascii=False)  # a JSON string is a YAML scalar


def _find(mapping: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if not isinstance(mapping, yaml.MappingNode):
        return None
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def _line_end(text: str, index: int) -> int:
    """Index just after the line holding ``index - 1`` (the end of a node's last line)."""
    nl = text.find("\n", max(index - 1, 0))
    return len(text) if nl < 0 else nl + 1


def add_entry(text: str, description: str) -> str:
    """``text`` with ``description`` appended to ``approvals.command_allowlist``."""
    root = compose(text) if text.strip() else None  # bounded: the file may be hostile
    item = _item(description)
    if root is not None and not isinstance(root, yaml.MappingNode):
        raise ConfigError("the top level of the config file is not a mapping")
    approvals = _find(root, "approvals")
    if approvals is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{sep}approvals:\n  command_allowlist:\n    - {item}\n"
    akey, amap = approvals
    if isinstance(amap, yaml.ScalarNode) and amap.value in ("", "~", "null"):
        end = amap.end_mark.index if amap.value else akey.end_mark.index + 1
        return (text[:akey.end_mark.index] + ":\n  command_allowlist:\n    - " + item + "\n"
                + text[_line_end(text, end):])
    if not isinstance(amap, yaml.MappingNode):
        raise ConfigError("approvals: expected a mapping", key="approvals")
    found = _find(amap, "command_allowlist")
    if found is None:
        if amap.flow_style:
            raise ConfigError("approvals is written in flow style; add the entry by hand",
                              key="approvals")
        first = amap.value[0][0] if amap.value else None
        indent = " " * (first.start_mark.column if first else akey.start_mark.column + 2)
        at = _line_end(text, amap.value[-1][1].end_mark.index if amap.value
                       else amap.end_mark.index)
        prefix = text[:at] if text[:at].endswith("\n") else text[:at] + "\n"
        return prefix + f"{indent}command_allowlist:\n{indent}  - {item}\n" + text[at:]
    lkey, seq = found
    if isinstance(seq, yaml.SequenceNode) and not seq.flow_style and seq.value:
        last = seq.value[-1]
        dash_col = seq.start_mark.column
        at = _line_end(text, last.end_mark.index)
        prefix = text[:at] if text[:at].endswith("\n") else text[:at] + "\n"
        return prefix + " " * dash_col + f"- {item}\n" + text[at:]
    if isinstance(seq, yaml.SequenceNode):  # flow style [a, b] or empty
        items = [_item(v.value) for v in seq.value if isinstance(v, yaml.ScalarNode)]
        new = "[" + ", ".join([*items, item]) + "]"
        return text[:seq.start_mark.index] + new + text[seq.end_mark.index:]
    if isinstance(seq, yaml.ScalarNode) and seq.value in ("", "~", "null"):
        start = seq.start_mark.index if seq.value else lkey.end_mark.index + 1
        end = seq.end_mark.index if seq.value else start
        return text[:start].rstrip(" ") + f" [{item}]" + text[end:]
    raise ConfigError("approvals.command_allowlist: expected a list",
                      key="approvals.command_allowlist")


def persist_allowlist(path: str | Path, description: str) -> bool:
    """Append ``description`` unless present; True when the file changed."""
    path = Path(path).expanduser()
    with _lock:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            raise ConfigError(f"cannot read config file: {exc}", path=str(path)) from exc
        current = parse_config(text, source=str(path)) if text.strip() else None
        if current is not None and description in current.approvals.command_allowlist:
            return False
        try:
            new = add_entry(text, description)
        except yaml.YAMLError as exc:
            raise ConfigError(f"YAML error: {exc}", path=str(path)) from exc
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=str(path), key=exc.key) from exc
        parse_config(new, source=str(path))  # never write a file the loader would refuse
        _atomic_write(path, new)
        return True


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
