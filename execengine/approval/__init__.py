"""Dangerous-command approval.

``patterns`` (the table and the hard blocks), ``normalize`` (de-obfuscation before
matching), ``matcher`` (:func:`assess`), ``approver`` (the :class:`Approver` interface:
prompt, callback, smart classifier, policy, chain), ``gate`` (:func:`check_command`, the
flow every terminal command goes through), ``script`` (:func:`check_script`, the approval
of a whole ``execute_code`` script before it starts), ``persist`` (adding to
``approvals.command_allowlist`` in config.yaml).
"""

from __future__ import annotations

from execengine.approval.approver import (
    Answer,
    ApprovalRequest,
    Approver,
    CallbackApprover,
    ChainApprover,
    Decision,
    PolicyApprover,
    PromptApprover,
    SmartApprover,
)
from execengine.approval.gate import Verdict, check_command
from execengine.approval.matcher import Assessment, assess
from execengine.approval.script import ScriptScope, ScriptVerdict, check_script

__all__ = [
    "Answer",
    "ApprovalRequest",
    "Approver",
    "Assessment",
    "CallbackApprover",
    "ChainApprover",
    "Decision",
    "PolicyApprover",
    "PromptApprover",
    "ScriptScope",
    "ScriptVerdict",
    "SmartApprover",
    "Verdict",
    "assess",
    "check_command",
    "check_script",
]
