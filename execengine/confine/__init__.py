"""One policy for a script and everything it reaches.

* :mod:`.policy` — :class:`ExecutionPolicy`: roots, denied paths, network, confinement
* :mod:`.beneath` — opening paths beneath a directory (``openat2``, or an ``O_NOFOLLOW`` walk)
* :mod:`.files` — file tool calls confined to the policy's roots, race-free
* :mod:`.terminal` — a script's ``terminal`` commands run in a sandbox at its level
* :mod:`.domains`, :mod:`.proxy` — the network allow-list and the host-side proxy enforcing it
"""

from __future__ import annotations

from execengine.confine.policy import ALWAYS_DENIED, ExecutionPolicy, policy_of

__all__ = ["ALWAYS_DENIED", "ExecutionPolicy", "policy_of"]
