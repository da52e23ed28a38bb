"""The execute_code engine (host side).

:mod:`.core` (``Engine``, ``execute_code``) ties together :mod:`.stub` (renders
``hermes_tools``), :mod:`.staging` (the per-execution directory), :mod:`.interpreter`
(which Python), :mod:`.allowed` (which tools), :mod:`.supervise` (deadlines, teardown),
:mod:`.capture` (bounded output) and :mod:`.result` (``ExecutionResult``). Persistent
sessions: :mod:`.sessions` (``SessionManager``, named kernels) drives :mod:`.kernel` (the
host's handle on one kernel process).
"""

from execengine.engine.core import Engine, aexecute_code, execute_code
from execengine.engine.result import ExecutionResult
from execengine.engine.sessions import SessionInfo, SessionManager

__all__ = ["Engine", "ExecutionResult", "SessionInfo", "SessionManager", "aexecute_code",
           "execute_code"]
