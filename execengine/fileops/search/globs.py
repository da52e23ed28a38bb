"""Shell-style globs and .gitignore patterns, translated to regular expressions.

Globs (``file_glob``, file-name search): ``*`` and ``?`` stay inside one path component,
``**`` crosses them, ``[...]`` is a class (``[!...]`` negated), ``{a,b}`` an alternation. A
glob without ``/`` is matched against the file name, one with ``/`` against the path below
the search root.

.gitignore lines follow git's rules: ``#`` comments, ``!`` re-includes, a trailing ``/``
matches directories only, a ``/`` at the start or in the middle anchors the pattern to the
folder of the .gitignore, otherwise it matches at any depth; ``**/``, ``/**`` and ``/**/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

try:  # the regex engine releases the GIL and takes a timeout; the file tools shipped to an
    import regex  # ssh remote (standard library only) fall back to re there
except ImportError:  # pragma: no cover - exercised on the remote
    regex = None

from execengine.errors import SearchTooSlowError

#: how long one glob or .gitignore pattern may take on one name: both come from scripts
#: (a ``file_glob``, a .gitignore the script wrote) and ``*a*a*a...*b`` backtracks for
#: ever; the ``regex`` engine releases the GIL meanwhile, ``re`` would freeze the host
MATCH_SECONDS = 2.0


def _bounded(pattern: Any, method: str, subject: str, text: str) -> bool:
    if regex is None:
        return getattr(pattern, method)(subject) is not None
    try:
        found = getattr(pattern, method)(subject, timeout=MATCH_SECONDS, concurrent=True)
    except TimeoutError:
        raise SearchTooSlowError(f"the pattern {text!r} took longer than {MATCH_SECONDS:g}s to "
                          "match one name (too many '*'): simplify it") from None
    return found is not None


def _translate(pattern: str, *, braces: bool) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    depth = 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "*":
            if pattern.startswith("**", i):
                before_ok = i == 0 or pattern[i - 1] == "/"
                after = pattern[i + 2:i + 3]
                if before_ok and after == "/":
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                if before_ok and after == "":
                    out.append(".*")
                    i += 2
                    continue
            out.append("[^/]*")
            while i < n and pattern[i] == "*":
                i += 1
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"[{'^' if neg else ''}{body}]")
                i = j
        elif braces and c == "{":
            depth += 1
            out.append("(?:")
        elif braces and c == "}" and depth:
            depth -= 1
            out.append(")")
        elif braces and c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ValueError(f"unbalanced '{{' in glob {pattern!r}")
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    text: str
    regex: Any  # a regex.Pattern (see MATCH_SECONDS)
    on_path: bool  # match the relative path (the glob has a '/'), else the file name

    def matches(self, rel_path: str) -> bool:
        subject = rel_path if self.on_path else rel_path.rsplit("/", 1)[-1]
        return _bounded(self.regex, "fullmatch", subject, self.text)


def compile_glob(text: str) -> Glob:
    body = text[2:] if text.startswith("./") else text
    on_path = "/" in body.strip("/") or body.startswith("**")
    translated = _translate(body.lstrip("/"), braces=True)
    re.compile(translated)  # Python's verdict on the syntax (re.error for the caller)
    return Glob(text, (regex or re).compile(translated), on_path)


@dataclass(frozen=True)
class IgnoreRule:
    regex: Any  # a regex.Pattern (see MATCH_SECONDS)
    negate: bool
    dir_only: bool


def parse_gitignore(text: str) -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        # trailing spaces are dropped unless escaped
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        line = stripped
        negate = line.startswith("!")
        if negate or line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/") and not line.endswith("\\/")
        line = line.rstrip("/") if dir_only else line
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line, braces=False)
        if not anchored:
            body = "(?:.*/)?" + body
        try:
            compiled = re.compile(body + r"\Z", re.DOTALL)
            if regex is not None:
                compiled = regex.compile(body + r"\Z", regex.DOTALL)
        except (re.error, getattr(regex, "error", re.error)):
            continue  # git ignores lines it cannot parse
        rules.append(IgnoreRule(compiled, negate, dir_only))
    return rules


def ignore_verdict(rules: list[IgnoreRule], rel_path: str, is_dir: bool) -> bool | None:
    """True (ignored), False (re-included) or None (no rule matched)."""
    for rule in reversed(rules):
        if rule.dir_only and not is_dir:
            continue
        if _bounded(rule.regex, "match", rel_path, rel_path):
            return not rule.negate
    return None
