"""An MCP ``tools/call`` result as the value a script (or the model) receives.

- ``isError``: ``{"error": <the text content>}``, the usual tool error shape;
- a tool that declares an output schema and returns ``structuredContent``: that object;
- otherwise ``{"result": <text blocks joined>}``, and when the result holds images, audio or
  resources, ``"content"`` lists them as described entries (type, MIME type, size, URI, the
  text of a text resource), never the raw base64 data.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

#: text of an embedded text resource kept in its entry
MAX_RESOURCE_TEXT = 20_000


def _b64_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def describe_block(block: Any) -> dict[str, Any]:
    """One non-text content block as a JSON entry."""
    kind = getattr(block, "type", "unknown")
    if kind in ("image", "audio"):
        size = _b64_size(getattr(block, "data", "") or "")
        return {"type": kind, "mime_type": getattr(block, "mime_type", None), "bytes": size,
                "note": f"{kind} data not included"}
    if kind == "resource":
        res = getattr(block, "resource", None)
        entry: dict[str, Any] = {"type": "resource", "uri": str(getattr(res, "uri", "")),
                                 "mime_type": getattr(res, "mime_type", None)}
        text = getattr(res, "text", None)
        if isinstance(text, str):
            entry["text"] = text[:MAX_RESOURCE_TEXT]
            if len(text) > MAX_RESOURCE_TEXT:
                entry["truncated_chars"] = len(text) - MAX_RESOURCE_TEXT
        else:
            entry["bytes"] = _b64_size(getattr(res, "blob", "") or "")
            entry["note"] = "binary resource data not included"
        return entry
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(getattr(block, "uri", "")),
                "name": getattr(block, "name", None),
                "description": getattr(block, "description", None),
                "mime_type": getattr(block, "mime_type", None)}
    return {"type": str(kind), "note": "content type not understood"}


def to_value(result: Any, *, has_output_schema: bool) -> dict[str, Any]:
    """The script-facing value of a ``CallToolResult``."""
    blocks = list(getattr(result, "content", None) or [])
    texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
    others = [describe_block(b) for b in blocks if getattr(b, "type", None) != "text"]
    text = "\n".join(texts)
    if getattr(result, "is_error", False):
        return {"error": text or "the MCP tool reported an error without a message"}
    structured = getattr(result, "structured_content", None)
    if has_output_schema and isinstance(structured, Mapping):
        return dict(structured)
    value: dict[str, Any] = {"result": text}
    if others:
        value["content"] = others
    return value
