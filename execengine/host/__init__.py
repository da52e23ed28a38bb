"""Where a registry's executions, terminal commands and file operations run: the host seam.

A :class:`~execengine.host.base.Host` is chosen once, from the configuration, by
:func:`~execengine.host.factory.make_host`: :class:`~execengine.host.local.LocalHost`
(this machine, at the configured isolation level) or
:class:`~execengine.host.ssh.SshHost` (``terminal.backend: ssh``). It owns what differs
between them: the engine's launcher, the terminal backend, the file backend, the default
working directory and each execution's confinement policy. Nothing outside the host
implementations asks which backend is configured. :class:`~execengine.host.fake.FakeHost`
is the in-memory twin for fast tests.
"""

from __future__ import annotations

from execengine.host.base import Host
from execengine.host.factory import host_class, make_host
from execengine.host.local import LocalHost

__all__ = ["Host", "LocalHost", "host_class", "make_host"]
