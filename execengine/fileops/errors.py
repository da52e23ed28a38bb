"""The one exception the file helpers raise: a user-facing problem with a file operation.

:class:`FileOpError` never leaves a tool: the handlers in ``execengine/tools`` catch it and
return :meth:`FileOpError.to_dict` (``{"error": ..., **fields}``), which is what a model or a
script calling through ``hermes_tools`` sees. It sits under :class:`ExecEngineError`.
"""

from __future__ import annotations

from typing import Any

from execengine.errors import ExecEngineError


class FileOpError(ExecEngineError):
    """A file operation cannot be done; ``fields`` are extra keys for the result dict."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.message, **self.fields}
