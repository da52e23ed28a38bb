"""Normalising a shell command before it is matched against the dangerous patterns.

Obfuscation that changes how a command *looks* but not what bash runs must not change the
verdict. :func:`normalize` therefore:

1. folds Unicode look-alikes: zero-width characters removed, NFKC (fullwidth ``ｒｍ`` is
   ``rm``), then a map of common Cyrillic/Greek confusables to Latin letters;
2. removes line continuations (backslash-newline);
3. replaces ``$IFS`` / ``${IFS}`` with a space and drops the empty positional parameters
   (``$1``..``$9``, ``$@``, ``$*``) a ``bash -c`` string sees (and reads the script a
   second time with them kept: after ``set --``, in a function or given arguments, ``"$@"``
   is a command word only known when it runs);
4. splits the command like bash does (quotes and backslashes inside words are removed, so
   ``r''m``, ``"r"m`` and ``r\\m`` are ``rm``) into simple commands at ``;``, ``&``, ``&&``,
   ``||``, ``|``, newlines and parentheses; the insides of ``$( )``, backticks and
   ``<( )`` / ``>( )`` are parsed as commands too;
5. unwraps each simple command, recursively: leading ``VAR=value`` assignments, ``sudo``,
   ``doas``, ``env``, ``command``, ``builtin``, ``exec``, ``nohup``, ``nice``, ``timeout``,
   ``xargs``, ``time``, ... are skipped; ``sh -c``, ``bash -c`` (any shell, any option
   cluster holding ``c``), ``su -c``, ``env -S`` and ``eval`` have their string parsed as
   commands, as is a here-string given to a shell, ``source`` or ``.`` (``sh <<< '...'``;
   a here-document's lines are commands already); ``busybox``/``toybox`` run their
   applet; ``find -exec``/``-execdir``/``-ok`` yield the command they run; a path before
   the command name is dropped (``/bin/rm`` is ``rm``); words are brace-expanded first
   (``{rm,-rf,/}`` is ``rm -rf /``). A nested script's command word that stays unknown
   (``bash -c '$X'``, ``eval '$X -rf /'``) is kept for ``unknown_command``.

The result has three views for the patterns: ``raw`` (after steps 1-3), ``text`` (all
words, quotes removed, joined with the operators, nested scripts appended) and
``commands`` (each unwrapped simple command as ``"name arg arg"``). Over-normalising is
safe here (it can only add a match), so the rules lean that way.
"""

# The confusables map is made of look-alike characters on purpose.
# ruff: noqa: RUF001, RUF002
from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass, field

from execengine.approval.expand import PARSE_BYTES, UNPARSED, ansi_c, expanded_commands

MAX_DEPTH = 8
#: the most words one word's brace expansion yields (the rest are not looked at)
MAX_BRACE_WORDS = 32
#: the longest word brace expansion looks into
MAX_BRACE_LEN = 1024

_ZERO_WIDTH = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad"
        "\u180e\u034f"), None)
_CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i",
    "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J",
    # Greek
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I",
    "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # punctuation that NFKC leaves alone
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
    "\u2212": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u2044": "/", "\u2215": "/", "\u29f8": "/", "\u00a0": " ",
})
_IFS = re.compile(r"\$\{IFS\}|\$IFS(?![A-Za-z0-9_])")
_EMPTY_PARAMS = re.compile(r"\$\{?[1-9@*]\}?")
_CONTINUATION = re.compile(r"\\\r?\n")
#: a command word only built when it runs (a variable, a substitution) after expansion
BUILT_NAME = r"^[^\s$`<>]*(?:[$`]|[<>]\()"
_BUILT_NAME = re.compile(BUILT_NAME)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
                    "rbash", "yash", "busybox"})
#: wrappers whose next non-option word is the command; value = options taking an argument
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-U", "-C", "-r", "-t", "-D", "-R", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "command": frozenset(), "builtin": frozenset(), "exec": frozenset({"-a"}),
    "nohup": frozenset(), "time": frozenset({"-f", "-o"}), "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p"}), "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(), "unbuffer": frozenset(), "chrt": frozenset(),
    "taskset": frozenset(), "xargs": frozenset({"-I", "-n", "-P", "-d", "-L", "-s", "-E",
                                                "-a", "-i"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "watch": frozenset({"-n", "-d", "--interval"}), "flock": frozenset({"-w", "-E"}),
    "strace": frozenset({"-o", "-e", "-p", "-s"}), "ltrace": frozenset({"-o", "-e"}),
    "proxychains": frozenset(), "torsocks": frozenset(), "firejail": frozenset(),
    "caffeinate": frozenset(), "systemd-run": frozenset({"-u", "-p", "--unit"}),
}
#: wrappers followed by one positional argument before the command
_ONE_ARG = {"timeout": 1, "taskset": 1, "chrt": 1, "flock": 1}


@dataclass(frozen=True)
class Normalized:
    raw: str
    text: str
    commands: tuple[str, ...]


def fold_unicode(text: str) -> str:
    text = text.translate(_ZERO_WIDTH)
    text = unicodedata.normalize("NFKC", text)
    return text.translate(_CONFUSABLES)


def prepare(text: str, *, drop_params: bool = True) -> str:
    """Steps 1-3: Unicode, continuations, ``$IFS`` and (``drop_params``) empty
    parameters."""
    text = fold_unicode(text)
    text = _CONTINUATION.sub("", text)
    text = _IFS.sub(" ", text)
    return _EMPTY_PARAMS.sub("", text) if drop_params else text


# -- lexing -------------------------------------------------------------------------------


@dataclass
class _Lexed:
    #: simple commands (word lists) and the operator that followed each
    commands: list[tuple[list[str], str]]
    #: scripts found inside $( ), backticks and <( ) >(), to be parsed too
    nested: list[str]


def _matching(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the ``close`` matching the ``open_`` before ``i`` (quote-aware)."""
    depth, n = 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"':
            i = _dquote_end(text, i + 1)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _dquote_end(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return n


def lex(text: str) -> _Lexed:
    out = _Lexed([], [])
    words: list[str] = []
    word: list[str] = []
    has_word = False
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal has_word
        if has_word:
            words.append("".join(word))
        word.clear()
        has_word = False

    def end_command(op: str) -> None:
        nonlocal words
        end_word()
        if words:
            out.commands.append((words, op))
        elif out.commands and op in ("|", "&&", "||") and not out.commands[-1][1]:
            out.commands[-1] = (out.commands[-1][0], op)
        words = []

    def substitution(start: int, body_start: int, open_: str, close: str) -> int:
        nonlocal has_word
        end = _matching(text, body_start, open_, close)
        inner = text[body_start:end - 1] if end <= n and text[end - 1] == close else \
            text[body_start:end]
        out.nested.append(inner)
        word.append(text[start:end])
        has_word = True
        return end

    while i < n:
        c = text[i]
        if c in " \t":
            end_word()
            i += 1
        elif c in "\n;":
            end_command(";")
            i += 1
        elif c == "#" and not has_word:
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "&":
            if text.startswith("&&", i):
                end_command("&&")
                i += 2
            elif text.startswith("&>", i):
                end_word()
                words.append("&>>" if text.startswith("&>>", i) else "&>")
                i += 3 if text.startswith("&>>", i) else 2
            else:
                end_command("&")
                i += 1
        elif c == "|":
            if text.startswith("||", i):
                end_command("||")
                i += 2
            else:
                end_command("|")
                i += 2 if text.startswith("|&", i) else 1
        elif c in "<>" and text.startswith("(", i + 1):
            i = substitution(i, i + 2, "(", ")")
        elif c in "<>":
            if has_word and "".join(word).isdigit():
                word.clear()
                has_word = False
            end_word()
            m = re.match(r"<<<|<<-?|<>|<&|<|>>|>\||>&|>", text[i:])
            assert m is not None
            words.append(m.group(0))
            i += len(m.group(0))
        elif c in "()":
            end_command(";")
            i += 1
        elif c == "\\":
            if i + 1 < n:
                word.append(text[i + 1])
            has_word = True
            i += 2
        elif c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            word.append(text[i + 1:j])
            has_word = True
            i = j + 1
        elif c == '"':
            i = _lex_dquote(text, i + 1, word, out)
            has_word = True
        elif c == "`":
            i = _lex_backticks(text, i, word, out)
            has_word = True
        elif c == "$" and text.startswith("$((", i):
            end = _matching(text, i + 3, "(", ")")
            word.append(text[i:end + 1])
            has_word = True
            i = end + 1
        elif c == "$" and text.startswith("$(", i):
            i = substitution(i, i + 2, "(", ")")
        elif c == "$" and text.startswith("$'", i):
            j = i + 2
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            word.append(ansi_c(text[i + 2:j]))
            has_word = True
            i = j + 1
        else:
            word.append(c)
            has_word = True
            i += 1
    end_command("")
    return out


def _lex_backticks(text: str, i: int, word: list[str], out: _Lexed) -> int:
    """A `...` substitution starting at ``i``: its body is checked as a nested command and
    kept in the word as written; returns the index after the closing backtick."""
    n = len(text)
    j = i + 1
    while j < n and text[j] != "`":
        j += 2 if text[j] == "\\" else 1
    out.nested.append(text[i + 1:j])
    word.append(text[i:j + 1])
    return j + 1


def _lex_dquote(text: str, i: int, word: list[str], out: _Lexed) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            word.append(nxt if nxt in '$`"\\\n' else "\\" + nxt)
            i += 2
        elif c == "$" and text.startswith("$(", i) and not text.startswith("$((", i):
            end = _matching(text, i + 2, "(", ")")
            out.nested.append(text[i + 2:end - 1])
            word.append(text[i:end])
            i = end
        elif c == "`":
            i = _lex_backticks(text, i, word, out)
        else:
            word.append(c)
            i += 1
    return n


@dataclass
class _Found:
    """What the passes over one command found."""

    #: simple commands, unwrapped, as words
    commands: list[list[str]]
    #: each script's words joined with its operators (the ``text`` view)
    texts: list[str]
    #: (depth, script) already parsed
    parsed: set[tuple[int, str]]
    #: bytes the expansion pass may still parse (nested ``sh -c`` strings parse again)
    budget: int = 2 * PARSE_BYTES
    #: ids of the commands a nested script's own passes judged (see :func:`_parse`)
    sealed: set[int] = field(default_factory=set)


# -- unwrapping ---------------------------------------------------------------------------


def _basename(word: str) -> str:
    base = word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word
    # the slash was inside a substitution (``$(curl http://x/c)``, ``${x/a/b}``): the word
    # stays whole, so it still reads as a command word built when it runs
    return word if any(c in base for c in ")}`") else base


def _skip_options(args: list[str], with_value: frozenset[str]) -> list[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1:]
        if not a.startswith("-") or a == "-":
            break
        if a in with_value or (a.startswith("--") and "=" not in a and a in with_value):
            i += 2
        else:
            i += 1
    return args[i:]


def _shell_script(args: list[str]) -> str | None:
    """The ``-c`` string of a shell invocation, if any."""
    for i, a in enumerate(args):
        if a == "--":
            return None
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            rest = [x for x in args[i + 1:] if x != "--"]
            return rest[0] if rest else None
        if not a.startswith(("-", "+")):
            return None
    return None


def _braces(word: str, limit: int = 0) -> list[str]:
    """Bash's brace expansion of ``word`` (``{rm,-rf,/}`` is ``rm -rf /``, ``/{bin,etc}``
    is ``/bin /etc``): at most ``limit`` words (:data:`MAX_BRACE_WORDS` by default), in one
    pass per word made; a word longer than :data:`MAX_BRACE_LEN` stays as written."""
    limit = limit or MAX_BRACE_WORDS
    if "{" not in word or len(word) > MAX_BRACE_LEN:
        return [word]
    stack: list[tuple[int, list[int]]] = []
    for i, c in enumerate(word):
        if c == "{":
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, commas = stack.pop()
            if not commas or (start and word[start - 1] == "$"):  # ${x,y}: a parameter
                continue
            cuts = [start, *commas, i]
            out: list[str] = []
            for a, b in itertools.pairwise(cuts):
                for done in _braces(word[:start] + word[a + 1:b] + word[i + 1:], limit):
                    if done not in out:
                        out.append(done)
                    if len(out) >= limit:
                        return out
            return out
    return [word]


def _unwrap(words: list[str], depth: int, found: _Found) -> None:
    if any("{" in w for w in words):  # bash expands braces before anything else
        words = [x for w in words for x in _braces(w)][:MAX_BRACE_WORDS * 4]
    while words and (words[0] in ("{", "}", "!", "then", "do", "else", "elif", "if",
                                  "while", "until") or _ASSIGNMENT.match(words[0])):
        words = words[1:]
    while words and words[-1] in ("}", "fi", "done"):
        words = words[:-1]
    if not words:
        return
    name = _basename(words[0])
    args = words[1:]
    if depth >= MAX_DEPTH:
        found.commands.append([name, *args])
        return
    if name in SHELLS or name in ("su", "source", "."):
        script = _shell_script(args) if name not in ("source", ".") else None
        if script is not None:
            _parse(script, depth + 1, found)
            return
        # a script on standard input: a here-string (a here-document's lines are
        # commands of the script already)
        for i, a in enumerate(args[:-1]):
            if a == "<<<":
                _parse(args[i + 1], depth + 1, found)
    if name in ("busybox", "toybox") and args:  # the applet is the command
        _unwrap(args, depth + 1, found)
    if name == "eval":
        _parse(" ".join(args), depth + 1, found)
        return
    if name == "env":
        rest: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-S", "--split-string") and i + 1 < len(args):
                _parse(" ".join(args[i + 1:]), depth + 1, found)
                return
            if a in ("-u", "--unset", "-C", "--chdir"):
                i += 2
            elif a.startswith("-") or _ASSIGNMENT.match(a):
                i += 1
            else:
                rest = args[i:]
                break
        _unwrap(rest, depth + 1, found)
        return
    if name in _WRAPPERS:
        rest = _skip_options(args, _WRAPPERS[name])
        rest = rest[_ONE_ARG.get(name, 0):]
        if rest:
            _unwrap(rest, depth + 1, found)
            return
    if name == "find":
        for i, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                tail = args[i + 1:]
                stop = next((k for k, w in enumerate(tail) if w in (";", "+")), len(tail))
                _unwrap(tail[:stop], depth + 1, found)
    found.commands.append([name, *args])


def _parse(script: str, depth: int, found: _Found) -> None:
    start = len(found.commands)
    _parse_variants(script, depth, found)
    # judged already at its own depth: a command word a nested script (``bash -c '$X'``,
    # ``eval``) builds when it runs must not be dropped as the outer lexer's to judge
    found.sealed.update(id(w) for w in found.commands[start:])


def _parse_variants(script: str, depth: int, found: _Found) -> None:
    if depth:
        # a nested script's positional parameters are empty (``bash -c 'r$1m'``), unless
        # it was given arguments or ran ``set --``: as whole words ("$@") they are the
        # command word only known when it runs, so the script is read both ways
        kept = prepare(script, drop_params=False)
        script = prepare(script)
        if kept != script:
            _parse_prepared(kept, depth, found)
    _parse_prepared(script, depth, found)


def _parse_prepared(script: str, depth: int, found: _Found) -> None:
    if (depth, script) in found.parsed:  # sh -c 'x' seen by both passes: once is enough
        return
    found.parsed.add((depth, script))
    lexed = lex(script)
    parts = []
    mark = len(found.commands)
    for words, op in lexed.commands:
        parts.append(" ".join(words) + (f" {op}" if op else ""))
        _unwrap(list(words), depth, found)
    found.texts.append(" ".join(parts))
    # a command word this lexer sees as written ($x) is the expansion pass's to judge: it
    # knows x when the script assigned it
    found.commands[mark:] = [w for w in found.commands[mark:]
                             if id(w) in found.sealed or not _BUILT_NAME.match(" ".join(w))]
    # the same script on a real parse, with what can be expanded before it runs expanded
    size = len(script.encode("utf-8", "surrogatepass"))
    found.budget -= size
    for words in expanded_commands(script) if found.budget >= 0 else [[UNPARSED]]:
        _unwrap(words, depth, found)
    if depth < MAX_DEPTH:
        for inner in lexed.nested:
            _parse(inner, depth + 1, found)


def normalize(command: str) -> Normalized:
    raw = prepare(command)
    found = _Found([], [], set())
    _parse(raw, 0, found)
    kept = prepare(command, drop_params=False)
    if kept != raw:  # "$@" after ``set --`` or in a function: see _parse
        _parse(kept, 0, found)
    commands = tuple(dict.fromkeys(" ".join(w) for w in found.commands))
    return Normalized(raw=raw, text=" ; ".join(t for t in found.texts if t), commands=commands)
