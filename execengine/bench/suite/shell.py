"""What the shell strategies share: one command over every file instead of a read per file.

A shell-savvy agent answers "the port of each of 20 configs" with one ``grep`` over the 20
files, not 20 ``read_file`` calls. Each command here prints ``path:key: value`` lines for the
keys asked for, whatever the config's format (YAML, JSON or INI); the plans parse them with
:func:`~execengine.bench.helpers.grep_pairs`, the scripts with their own code
(:func:`pairs_script`).
"""

from __future__ import annotations

#: every service config, sorted by path
LIST = "find configs -name 'config.*' | LC_ALL=C sort"
_GREP = "grep -HoE '\"?({keys})\"?[[:space:]]*[:=][[:space:]]*\"?[A-Za-z0-9-]+'"


def pairs(keys: str, *, first: int | None = None, files: str = "") -> str:
    """The command printing ``keys`` (``"port|region"``) of every config, of the ``first``
    ones by path, or of the files the command ``files`` lists."""
    grep = _GREP.format(keys=keys)
    if files:
        return f"{files} | xargs {grep} | LC_ALL=C sort"
    if first is None:
        return f"{grep} -r configs --include='config.*' | LC_ALL=C sort"
    return f"{LIST} | head -n {first} | xargs {grep} | LC_ALL=C sort"


def pairs_script(command: str, *, imports: str = "json, re") -> str:
    """The start of a script that runs ``command`` and collects ``found[path][key] = value``."""
    return f"""import {imports}
from hermes_tools import terminal
found = {{}}
for line in terminal({command!r})["output"].splitlines():
    path, _, hit = line.partition(":")
    key, value = re.match(r'"?(\\w+)"?\\s*[:=]\\s*"?([\\w-]+)', hit).groups()
    found.setdefault(path, {{}})[key] = value
"""
