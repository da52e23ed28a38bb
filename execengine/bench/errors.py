"""The benchmark harness's exceptions (under the library's one root).

    ExecEngineError
    └── BenchError                  the harness cannot run: missing extra, bad workflow file,
        └── WorkflowError           a workflow is malformed, or its two runs disagree
"""

from __future__ import annotations

from execengine.errors import ExecEngineError


class BenchError(ExecEngineError):
    """The benchmark harness cannot do what was asked (with the reason and the fix)."""


class WorkflowError(BenchError):
    """A workflow definition is malformed (which file, which key, what was expected)."""
