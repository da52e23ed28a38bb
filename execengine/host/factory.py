"""Choosing the host: the one place that reads ``terminal.backend``."""

from __future__ import annotations

from execengine.config import Config
from execengine.host.base import Host
from execengine.host.local import LocalHost
from execengine.host.ssh import SshHost

#: ``terminal.backend`` -> the host that serves it
HOSTS: dict[str, type[Host]] = {"local": LocalHost, "ssh": SshHost}


def host_class(config: Config) -> type[Host]:
    """The class of the host ``config`` configures."""
    return HOSTS[config.terminal.backend]


def make_host(config: Config) -> Host:
    """The host ``config`` configures (nothing is started until it is used)."""
    return host_class(config)(config)


def files_available(config: Config) -> bool | str:
    """Availability check of the file tools, by the configured host."""
    return host_class(config).files_available(config)


def terminal_available(config: Config) -> bool | str:
    """Availability check of the terminal tools, by the configured host."""
    return host_class(config).terminal_available(config)
