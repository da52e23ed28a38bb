"""Environments for child processes, built from an allow-list (never inherited then filtered).

Used by the execute_code engine and the terminal tool alike:

1. Variables named in a passthrough list (``terminal.env_passthrough``, and variables that
   skills register at run time) are copied when set, even when they look secret.
2. Any other name that contains a secret-looking word is dropped.
3. Of the rest, only the allow-listed names pass (``PATH``, ``HOME``, locale, ``XDG_*``, ...).
4. Fixed values are added: UTF-8 I/O, unbuffered output, no bytecode files, and ``TZ`` when
   configured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SECRET_WORDS = (
    "KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "PASSWD", "AUTH", "DSN", "WEBHOOK",
    "CREDS", "BEARER", "APIKEY",
)
ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TMP", "TEMP", "SHELL",
    "LOGNAME", "PYTHONPATH", "VIRTUAL_ENV",
})
ALLOWED_PREFIXES = ("LC_", "XDG_", "CONDA")
FIXED = {
    "PYTHONDONTWRITEBYTECODE": "1",
    # what a script printed before a timeout, an interrupt or a kill reaches the host (a
    # block-buffered stdout dies with the child); as the reference runs its child. It is
    # read at interpreter start, so it is part of the environment every execution of a
    # launcher shares: a pre-started interpreter (sandbox/zygote.py) starts with it too
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONUTF8": "1",
}
_SECRET_RE = re.compile("|".join(SECRET_WORDS))


def looks_secret(name: str) -> bool:
    return bool(_SECRET_RE.search(name.upper()))


def is_allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def build_child_env(
    source: Mapping[str, str],
    *,
    passthrough: Iterable[str] = (),
    tz: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a child, from ``source`` (usually ``os.environ``).

    ``extra`` is added last and wins (the engine's own RPC variables, ``PYTHONPATH``).
    """
    passthrough = set(passthrough)
    env: dict[str, str] = {}
    for name, value in source.items():
        if name in passthrough or (is_allowed(name) and not looks_secret(name)):
            env[name] = value
    env.update(FIXED)
    if tz:
        env["TZ"] = tz
    if extra:
        env.update(extra)
    return env
