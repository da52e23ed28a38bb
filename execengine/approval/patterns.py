"""The dangerous-command table, and the hard blocks no approval unlocks.

Each :class:`Pattern` is a regular expression with a description (the description is what
users approve: it is stored in session approvals and in ``approvals.command_allowlist``).
``scope`` says which view of :class:`execengine.approval.normalize.Normalized` it is
matched against:

``command``  each unwrapped simple command, ``"name arg ..."`` (patterns anchor with ``^``);
             so text that is only *data* to another command (``echo "rm -rf /"``,
             ``git commit -m "drop rm -rf"``) is not a match;
``text``     the whole command with quotes removed: SQL (it travels as data to a client
             such as ``psql -c``), pipes into shells, redirections;
``raw``      the command after Unicode/``$IFS`` folding only (fork bombs).

Decisions: a recursive ``rm`` of a plain relative path inside the working directory
(``rm -rf ./build``, ``rm -r node_modules``) is *not* flagged; any recursive ``rm`` of an
absolute path, ``~``, a ``$VARIABLE``, a glob at the top (``*``), ``.`` or a path
going up (``..``) is. Piping anything into a shell (``... | sh``) is flagged, because what
runs cannot be checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from execengine.approval.expand import UNPARSED
from execengine.approval.normalize import BUILT_NAME


@dataclass(frozen=True)
class Pattern:
    key: str
    regex: re.Pattern[str]
    description: str
    scope: str = "command"
    hard: bool = False


def _p(key: str, regex: str, description: str, *, scope: str = "command", hard: bool = False,
       flags: int = 0) -> Pattern:
    return Pattern(key, re.compile(regex, flags), description, scope, hard)


_RECURSIVE = r"(?=.*\s(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?:\s|$))"
_SYSTEM_DIRS = r"(?:bin|boot|dev|etc|home|lib\w*|opt|proc|root|sbin|srv|sys|usr|var|mnt|media)"
#: an argument that is the root, a top-level system directory, or the home directory
_VITAL = (rf"(?:/+\.?|/+\*|/+{_SYSTEM_DIRS}/*\*?|~/?\*?|\$HOME/?\*?|\$\{{HOME\}}/?\*?"
          r"|\.\./\.\.(?:/\.\.)*/?)")
#: an argument rm -r should not touch without asking: absolute, home, variable, glob, up
_RISKY = r"(?:[/~$*]|\.\.?(?:/\*?|/\.\.\S*)?(?=\s|$)|\.\./|\S*/\.\.(?:/|\s|$)|\{\})"
_DISK = r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md\d|dm-|mapper/)"
_HARMLESS_DEV = r"/dev/(?:null|zero|stdout|stderr|stdin|tty|fd/|pts/|shm/|random|urandom)"
_REDIRECT = r"(?:^|\s)(?:>|>>|>\||&>|&>>|>&)\s*"
_SHELL = r"(?:\S*/)?(?:ba|z|da|k|mk|a|c|tc|fi|ya)?sh"
_INTERP = rf"(?:{_SHELL}|(?:\S*/)?(?:python[\d.]*|perl|ruby|node|php|lua)|source|\.)"
#: _INTERP without the path prefix, for unanchored searches (the same matches exist)
_INTERP_NAME = r"(?:(?:ba|z|da|k|mk|a|c|tc|fi|ya)?sh|python[\d.]*|perl|ruby|node|php|lua|source|\.)"
_SUDO = r"(?:(?:sudo|doas)(?:\s+-\S+)*\s+)?(?:env\s+(?:\S+=\S*\s+)*)?"

HARD_BLOCKS: tuple[Pattern, ...] = (
    _p("rm_vital", rf"^rm{_RECURSIVE}.*\s{_VITAL}(?:\s|$)",
       "recursive delete of /, a system directory or the home directory", hard=True),
    _p("rm_no_preserve_root", r"^rm\s.*--no-preserve-root",
       "rm with --no-preserve-root", hard=True),
    # the lookbehind starts the name at a word's start only: from inside a long word the
    # name rescanned the rest of it at every position (quadratic, with the GIL held)
    _p("fork_bomb", r"(?<![\w:.-])([A-Za-z_:.][\w:.-]*)\s*\(\)\s*\{[^}]*?\1\s*\|\s*\1\s*&",
       "fork bomb", scope="raw", hard=True),
    # the same, declared with the ``function`` keyword (the parentheses optional)
    _p("fork_bomb_function",
       r"(?<![\w:.-])function\s+([A-Za-z_:.][\w:.-]*)\s*(?:\(\)\s*)?\{[^}]*?\1\s*\|\s*\1\s*&",
       "fork bomb", scope="raw", hard=True),
    _p("disk_format", rf"^(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs|mkdosfs|mkntfs)\s.*{_DISK}",
       "formatting a disk device", hard=True),
    _p("disk_dd", rf"^dd\s.*\bof={_DISK}", "raw write to a disk device", hard=True),
    _p("disk_redirect", rf"{_REDIRECT}{_DISK}", "redirecting output onto a disk device",
       scope="text", hard=True),
    # tee writes every file it names; cp, its last argument
    _p("disk_copy", rf"^(?:tee\s(?:.*\s)?{_DISK}|cp\s.*\s{_DISK}\S*\s*$)",
       "copying onto a disk device", hard=True),
    _p("chmod_root", rf"^(?:chmod|chown|chgrp){_RECURSIVE}.*\s/+(?:\.+/*)*(?:\s|$)",
       "recursive permission or owner change of /", hard=True),
)

DANGEROUS: tuple[Pattern, ...] = (
    _p("rm_recursive", rf"^rm{_RECURSIVE}.*\s{_RISKY}", "recursive delete"),
    _p("find_delete", r"^find\s.*\s(?:-delete\b|-exec(?:dir)?\s+(?:\S*/)?rm\s)",
       "deleting files found by find"),
    _p("shred", r"^(?:shred|srm|wipe)\s", "shredding files"),
    _p("format", r"^(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs|mkdosfs|mkntfs|fdisk|sfdisk|cfdisk"
       r"|parted|sgdisk|gdisk|blkdiscard)(?:\s|$)",
       "formatting or partitioning a disk"),
    _p("dd_device", r"^dd\s.*\bof=/dev/(?!(?:null|zero|stdout|stderr|tty)\b)",
       "raw write to a device with dd"),
    _p("device_redirect", rf"{_REDIRECT}/dev/(?!(?:null|zero|stdout|stderr|stdin|tty)\b"
       r"|fd/|pts/|shm/)", "writing to a device file", scope="text"),
    _p("sql_drop", r"\bDROP\s+(?:TABLE|DATABASE|SCHEMA|INDEX|VIEW|USER|ROLE|COLLECTION|"
       r"FUNCTION|PROCEDURE|TRIGGER)\b", "SQL DROP", scope="text", flags=re.I),
    _p("sql_truncate", r"\bTRUNCATE\s+(?:TABLE\s+)?(?!-)[\w.\"`\[\]]+",
       "SQL TRUNCATE", scope="text", flags=re.I),
    _p("sql_delete_all", r"\bDELETE\s+FROM\s+[\w.\"`\[\]]+(?![^;]*\bWHERE\b)",
       "SQL DELETE without WHERE", scope="text", flags=re.I),
    _p("sql_update_all", r"\bUPDATE\s+[\w.\"`\[\]]+\s+SET\b(?![^;]*\bWHERE\b)",
       "SQL UPDATE without WHERE", scope="text", flags=re.I),
    _p("system_config_redirect", rf"{_REDIRECT}(?:/etc/|/boot/|/usr/lib/systemd/|"
       r"(?:~|\$HOME|/root)/\.ssh/)", "overwriting system configuration", scope="text"),
    _p("system_config_write", r"^(?:tee(?:\s.*)?\s(?:/etc|/boot)/|"
       r"(?:cp|mv|install|ln|rsync)\s.*\s(?:/etc|/boot)(?:/\S*)?\s*$|"
       r"sed(?=.*\s-[a-zA-Z]*i)(?=.*\s/etc/)|truncate\s.*\s/etc/)",
       "overwriting system configuration"),
    _p("service_stop", r"^(?:systemctl\s(?:\S+\s)*?(?:stop|disable|mask|kill|isolate)\b|"
       r"service\s+\S+\s+(?:stop|restart)\b|rc-service\s+\S+\s+stop\b|"
       r"launchctl\s+(?:unload|remove|bootout|disable|kill)\b|"
       r"update-rc\.d\s+\S+\s+(?:remove|disable)\b)", "stopping or disabling services"),
    _p("power", r"^(?:shutdown|reboot|halt|poweroff)(?:\s|$)|^(?:init|telinit)\s+[06]\b|"
       r"^systemctl\s(?:\S+\s)*?(?:poweroff|reboot|halt|rescue|emergency)\b",
       "shutting down or rebooting the machine"),
    _p("download_to_shell", rf"\b(?:curl|wget|fetch|aria2c|http|lwp-request)\b[^;&]*\|\s*"
       rf"{_SUDO}{_INTERP}(?:\s|$)", "piping a download into a shell", scope="text"),
    # unanchored: _INTERP_NAME (no optional path prefix) finds the same commands, where
    # _INTERP's "(?:\S*/)?" rescanned the rest of the line from every position (seconds
    # of the host's GIL for a few thousand slashes in a script's terminal command)
    _p("download_substitution", rf"(?:{_INTERP_NAME}\s+<\(|(?:-c|eval)\s+\$\(|\$\()\s*"
       r"(?:curl|wget|fetch)\b", "running a download through a shell", scope="text"),
    _p("shell_reads_substitution",
       rf"^(?:{_SHELL}|source|\.)\s(?:.*\s)?<\(", "a shell running a command's output"),
    _p("pipe_to_shell", rf"\|\s*{_SUDO}{_SHELL}(?:\s+-[a-zA-Z]+)*\s*(?:$|[;&|)])",
       "piping text into a shell", scope="text"),
    _p("kill_all", r"^kill\s(?:.*\s)?-1\s*$|^kill\s+-(?:9|KILL|SIGKILL|TERM|15)\s+-1\b|"
       r"^killall5\b|^pkill\s(?:.*\s)?(?:\.|\.\*|\.\+|\^|\$|-u\s+\S+)\s*$|"
       r"^killall\s(?:.*\s)?-u\s", "killing all processes"),
    _p("chmod_system", rf"^(?:chmod|chown|chgrp|setfacl){_RECURSIVE}.*\s(?:/+|/+"
       rf"{_SYSTEM_DIRS}(?:/\S*)?|~\S*|\$HOME\S*|\$\{{HOME\}}\S*)(?:\s|$)",
       "recursive permission or owner change on system paths"),
    _p("git_force_push", r"^git\s(?:.*\s)?push\s(?:.*\s)?(?:--force(?:-with-lease)?(?:=\S*)?|"
       r"-[a-zA-Z]*f[a-zA-Z]*|--mirror|\+\S+)(?:\s|$)", "git force push"),
    _p("git_reset_hard", r"^git\s(?:.*\s)?reset\s(?:.*\s)?--hard\b",
       "discarding uncommitted changes (git reset --hard)"),
    _p("git_clean", r"^git\s(?:.*\s)?clean\s(?:.*\s)?-[a-zA-Z]*f",
       "deleting untracked files (git clean -f)"),
    _p("crontab_remove", r"^crontab\s(?:.*\s)?-r\b", "deleting the crontab"),
    _p("user_delete", r"^(?:userdel|deluser|groupdel|delgroup)\s", "deleting users or groups"),
    # a command word built when the command runs ($x, ${x:-y}, $(...), `...`, <(...))
    # after every static expansion (execengine/approval/expand.py): what runs is not known
    _p("unknown_command", BUILT_NAME,
       "a command whose name is only known when it runs"),
    _p("unparsed", rf"^{UNPARSED}$", "a command too complex to check before it runs"),
    _p("firewall_flush", r"^(?:iptables|ip6tables)\s(?:.*\s)?(?:-F|-X|--flush)\b|"
       r"^(?:ufw\s+disable|nft\s+flush)\b", "flushing firewall rules"),
)

ALL_PATTERNS: tuple[Pattern, ...] = HARD_BLOCKS + DANGEROUS
