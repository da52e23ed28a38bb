"""The execute_code engine (host side).

:mod:`.core` (``Engine``, ``execute_code``) ties together :mod:`.stub` (renders
``hermes_tools``), :mod:`.staging` (the per-execution directory), :mod:`.interpreter`
(which Python), :mod:`.allowed` (which tools), :mod:`.supervise` (deadlines, teardown),
:mod:`.capture` (bounded output) and :mod:`.result` (``ExecutionResult``).
"""

from execengine.engine.core import Engine, aexecute_code, execute_code
from execengine.engine.result import ExecutionResult

__all__ = ["Engine", "ExecutionResult", "aexecute_code", "execute_code"]
