"""The one policy of an execution, and the allow-list proxy that enforces its network rule.

Both a one-shot execution (:mod:`.core`) and a session's kernel (:mod:`.sessions`) hold one
:class:`~execengine.confine.policy.ExecutionPolicy` for the script and every tool call it
makes; with ``network: allowlist`` a host-side proxy serves that execution on the loopback
and on a Unix socket in a private folder (bridged into an ``isolated`` sandbox's own network
namespace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Sequence

from execengine.config import Config
from execengine.confine.domains import DomainPolicy
from execengine.confine.policy import ExecutionPolicy
from execengine.confine.proxy import AllowListProxy
from execengine.rpc.channel import make_socket_dir


def execution_policy(config: Config, *, cwd: str, level: str, extra_writable: Sequence[str],
                     stack: contextlib.ExitStack) -> ExecutionPolicy:
    """The execution's policy; with an allow-list, its proxy is started and closed (its
    folder removed) with ``stack``, and the policy names the proxy's port and socket."""
    policy = ExecutionPolicy.for_execution(config, cwd=cwd, level=level,
                                           extra_writable=tuple(extra_writable))
    if policy.network != "allowlist":
        return policy
    proxy_dir = make_socket_dir()
    stack.callback(shutil.rmtree, proxy_dir, True)
    proxy = stack.enter_context(AllowListProxy(
        DomainPolicy.of(policy.allowed_domains, policy.denied_domains),
        unix_path=os.path.join(proxy_dir, "proxy.sock")))
    return dataclasses.replace(policy, proxy_port=proxy.port, proxy_socket=proxy.unix_path)
