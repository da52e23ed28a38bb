"""Working directories a sandbox is not given by default: a user's home folder.

A sandbox acts in its working directory as the folder's owner (see
:mod:`execengine.isolation.owner`). In a home folder that means the files that run later
as that user, outside any sandbox: the shell's start-up files, ``~/.ssh/authorized_keys``
and ``config``, ``~/.gitconfig`` (``core.fsmonitor``, aliases, hooks paths). So a folder
that is a user's home, holds one, or holds such files is refused with the setting that
allows it (``policy.allow_home_workdir``). So is a folder inside a home's hidden folders
(``~/.config``, ``~/.local``...) or its ``~/bin``: they hold what the user's programs run
or trust just as much (``~/.config/git/config``, ``~/.local/bin`` on ``PATH``, the user's
``site-packages``). A project elsewhere in a home (``~/src/app``) is fine. System folders
are refused whatever it says (:mod:`execengine.engine.confinement`).
"""

from __future__ import annotations

import os
import pwd

from execengine.confine.beneath import is_beneath
from execengine.workdirs import recent

#: what marks a folder as a home: files a login shell, ssh or git run or trust later
HOME_FILES = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
    ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".login",
    ".kshrc", ".mkshrc", ".config/fish", ".pam_environment", ".xprofile", ".xinitrc",
    ".xsession", ".xsessionrc", ".ssh", ".gnupg", ".gitconfig", ".config/git",
    ".git-credentials", ".netrc",
)
#: folders of a home (besides the hidden ones) whose files run later as its user
HOME_RUN_FOLDERS = ("bin",)
SETTING = "policy.allow_home_workdir"


def homes() -> dict[str, str]:
    """Every user's home folder that exists (resolved), with its user's name; and the
    engine's own ``~``. As of at most a second ago."""
    def build() -> dict[str, str]:
        found: dict[str, str] = {}
        try:
            entries = pwd.getpwall()
        except OSError:
            entries = []
        for entry in entries:
            home = os.path.realpath(entry.pw_dir or "/")
            if home != "/" and os.path.isdir(home):
                found.setdefault(home, entry.pw_name)
        own = os.path.realpath(os.path.expanduser("~"))
        if own != "/" and os.path.isdir(own):
            found.setdefault(own, "the engine's user")
        return found

    return recent(("homes", os.environ.get("HOME")), build)


def home_reason(real: str) -> str | None:
    """Why the resolved folder ``real`` counts as a home folder, or None."""
    found = homes()
    if real in found:
        return f"it is the home folder of {found[real]}"
    inside = sorted(h for h in found if is_beneath(h, real))
    if inside:
        return f"it holds the home folder of {found[inside[0]]} ({inside[0]})"
    for home, user in found.items():
        if is_beneath(real, home):
            top = os.path.relpath(real, home).split("/")[0]
            if top.startswith(".") or top in HOME_RUN_FOLDERS:
                return (f"it lies in {os.path.join(home, top)} of the home folder of {user} "
                        "(what the user's programs run or trust: ~/.config/git, ~/.local/bin)")
    for name in HOME_FILES:
        if os.path.lexists(os.path.join(real, name)):
            return f"it holds {name}, as a home folder does"
    return None


def refuse_home(cwd: str, allowed: bool) -> str | None:
    """The message refusing ``cwd`` as a sandbox's working directory because it is a home
    folder (see :func:`home_reason`), or None when it is not one or ``allowed``."""
    if allowed:
        return None
    reason = home_reason(os.path.realpath(cwd))
    if reason is None:
        return None
    return (f"refusing {cwd!r} as a sandbox's working directory: {reason} (a script acts "
            "there as the folder's owner and could change what the owner's next login, ssh "
            f"or git command runs; set {SETTING}: true to allow it)")
