"""Static expansion of a shell command, on a real parse (tree-sitter's bash grammar).

The lexer in :mod:`execengine.approval.normalize` sees words as written; a command word that
is only built when the command runs (``x=rm; $x -rf /``, ``$(echo rm) -rf /``) passed it.
This pass parses the command with tree-sitter-bash and walks it in source order, keeping
what can be known before it runs:

- assignments (``x=rm``, ``export``/``declare``/``readonly``/``typeset x=rm``, ``for x in
  ...``): made at the top level of the script, a variable has that one value from there on;
  made anywhere else (inside ``if``, a loop, a function, a subshell, after ``&&``) it *may*
  hold it, so it gets one more candidate value and stays "maybe unknown"; ``read x`` and
  ``unset x`` make it unknown;
- ``$x``, ``${x}`` and ``${x:-word}`` (also ``-``, ``:=``, ``=``): the value, or the default
  when the variable is unknown (``:=``/``=`` then assign it);
- unquoted expansions are split on ``IFS`` (its known value, else space, tab, newline);
- ``$(echo words)`` and backticks around ``echo`` of words it can expand: those words.

Anything else (any other command substitution, ``${x/a/b}``, arithmetic, an unknown
variable) stays as written, so a command word built from it still shows a ``$``, a backtick
or ``<(``: the ``unknown_command`` pattern asks about it. Each simple command yields its
*literal* variant (a variable with one known value replaced, the rest as written), then
variants taking each variable's other candidates and defaults in turn; over-approximating
only adds matches. Everything is bounded: candidates per variable, variants per command,
how deep a word is expanded, how much of an unexpanded part is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import tree_sitter_bash
from tree_sitter import Language, Parser

if TYPE_CHECKING:
    from tree_sitter import Node

#: the longest script parsed (see :func:`expanded_commands`)
PARSE_BYTES = 16 * 1024
#: the command reported for a script not parsed in time
UNPARSED = "\x00unparsed"
#: candidate values kept per variable (beyond them, only "unknown")
MAX_VALUES = 4
#: how deep a word's parts are expanded before the rest is kept as written
MAX_WORD_DEPTH = 24
#: how much of a part that is kept as written is kept (the patterns look at its start)
MAX_LITERAL = 256
_DEFAULT_IFS = " \t\n"
_DEFAULTS = frozenset({":-", "-", ":=", "="})
_DECLARE = frozenset({"export", "declare", "readonly", "typeset"})


@lru_cache(maxsize=1)
def _language() -> Language:
    return Language(tree_sitter_bash.language())


@dataclass(frozen=True)
class _Piece:
    text: str
    #: an unquoted expansion's result: split on IFS
    split: bool = False
    #: kept as written because its value is not known
    unknown: bool = False


@dataclass
class _Pass:
    """One walk over one parsed script."""

    source: bytes
    #: variable -> candidate values; ``None`` is "unknown"; a missing name is unknown
    env: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    #: set while expanding a command when some part has a candidate beyond the variant
    more: bool = False

    # -- the walk over statements -------------------------------------------------------

    def walk(self, root: Node) -> None:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, prefix = stack.pop()
            kind = node.type
            if kind == "command":
                self._command(node)
            elif kind == "variable_assignment" and not prefix:
                self._assign(node, spine=self._top(node, root))
            elif kind == "for_statement":
                self._for(node)
            children = node.children
            is_command = kind == "command"
            for child in reversed(children):
                stack.append((child, is_command and child.type == "variable_assignment"))

    @staticmethod
    def _top(node: Node, root: Node) -> bool:
        parent = node.parent
        if parent is not None and parent.type == "declaration_command":
            keyword = parent.children[0].type if parent.children else ""
            if keyword not in _DECLARE:  # local: a function's
                return False
            parent = parent.parent
        return parent is not None and parent.id == root.id

    def _set(self, name: str, values: tuple[str | None, ...], *, spine: bool) -> None:
        if not spine:
            values = (*self.env.get(name, (None,)), *values)
        unique = tuple(dict.fromkeys(values))
        if len(unique) > MAX_VALUES:
            unique = (None, *[v for v in unique if v is not None][:MAX_VALUES - 1])
        self.env[name] = unique

    def _assign(self, node: Node, *, spine: bool) -> None:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None or name_node.type != "variable_name":
            return
        name = self._text(name_node)
        operator = next((c.type for c in node.children if c.type in ("=", "+=")), "=")
        if operator != "=" or (value is not None and value.type == "array"):
            self._set(name, (None,), spine=spine)
            return
        values: list[str | None] = []
        for k in range(MAX_VALUES + 1):
            self.more = False
            pieces = self._word(value, k, quoted=True, depth=0) if value is not None else []
            values.append(None if any(p.unknown for p in pieces)
                          else "".join(p.text for p in pieces))
            if not self.more:
                break
        self._set(name, tuple(values), spine=spine)

    def _for(self, node: Node) -> None:
        var = node.child_by_field_name("variable")
        if var is None:
            return
        values: list[str | None] = []
        for child in node.children_by_field_name("value"):
            pieces = self._word(child, 0, quoted=False, depth=0)
            values.extend(None if any(p.unknown for p in pieces) else f
                          for f in self._fields(pieces))
        self._set(self._text(var), tuple(values) or (None,), spine=False)

    def _command(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return
        parts = [name, *node.children_by_field_name("argument")]
        seen: set[tuple[str, ...]] = set()
        for k in range(MAX_VALUES + 2):
            self.more = False
            words: list[str] = []
            for part in parts:
                words.extend(self._fields(self._word(part, k, quoted=False, depth=0)))
            if words and tuple(words) not in seen:
                seen.add(tuple(words))
                self.commands.append(words)
            if not self.more:
                break
        head = self._fields(self._word(name, 0, quoted=False, depth=0))
        if head and head[0] in ("read", "unset", "mapfile", "readarray"):
            for word in parts[1:]:
                text = self._text(word)
                if text.isidentifier():
                    self._set(text, (None,), spine=False)

    # -- words ---------------------------------------------------------------------------

    def _text(self, node: Node, limit: int | None = None) -> str:
        end = node.end_byte if limit is None else min(node.end_byte, node.start_byte + limit)
        return self.source[node.start_byte:end].decode("utf-8", "replace")

    def _as_written(self, node: Node) -> list[_Piece]:
        return [_Piece(self._text(node, MAX_LITERAL), unknown=True)]

    def _ifs(self) -> str:
        values = self.env.get("IFS")
        return values[0] if values and len(values) == 1 and values[0] is not None \
            else _DEFAULT_IFS

    def _fields(self, pieces: list[_Piece]) -> list[str]:
        """Field splitting: split parts break at IFS characters, the rest stays whole."""
        ifs = self._ifs()
        fields: list[str] = []
        current: list[str] = []
        have = False
        for piece in pieces:
            if not piece.split:
                current.append(piece.text)
                have = True
                continue
            for ch in piece.text:
                if ch in ifs:
                    if have:
                        fields.append("".join(current))
                    current, have = [], False
                else:
                    current.append(ch)
                    have = True
        if have:
            fields.append("".join(current))
        return fields

    def _word(self, node: Node, k: int, *, quoted: bool, depth: int) -> list[_Piece]:
        if depth > MAX_WORD_DEPTH:
            return self._as_written(node)
        kind = node.type
        if kind in ("word", "number"):
            return [_Piece(_unescape(self._text(node)))]
        if kind == "raw_string":
            return [_Piece(self._text(node)[1:-1])]
        if kind == "ansi_c_string":
            return [_Piece(ansi_c(self._text(node)[2:-1]))]
        if kind == "string_content":
            return [_Piece(_unescape(self._text(node), _DQUOTE_ESCAPABLE))]
        if kind in ("string", "translated_string", "concatenation", "command_name"):
            inner = quoted or kind in ("string", "translated_string")
            out: list[_Piece] = []
            for child in node.children:
                if child.type in ('"', '$"'):
                    continue
                out.extend(self._word(child, k, quoted=inner, depth=depth + 1))
            return out
        if kind == "simple_expansion":
            var = node.children[-1] if node.children else None
            if var is None or var.type != "variable_name":
                return self._as_written(node)
            return self._variable(node, self._text(var), None, k, quoted=quoted)
        if kind == "expansion":
            return self._expansion(node, k, quoted=quoted, depth=depth)
        if kind == "command_substitution":
            return self._substitution(node, k, quoted=quoted, depth=depth)
        return self._as_written(node)

    def _variable(self, node: Node, name: str, default: list[_Piece] | None, k: int, *,
                  quoted: bool) -> list[_Piece]:
        values = self.env.get(name, (None,))
        candidates: list[list[_Piece] | None] = []
        if len(values) == 1 and values[0] is not None:
            candidates.append([_Piece(values[0], split=not quoted)])
        else:
            candidates.append(None)  # as written
            candidates.extend([_Piece(v, split=not quoted)] for v in values if v is not None)
            if default is not None and None in values:
                candidates.append(default)
        if k + 1 < len(candidates):
            self.more = True
        chosen = candidates[min(k, len(candidates) - 1)]
        return self._as_written(node) if chosen is None else chosen

    def _expansion(self, node: Node, k: int, *, quoted: bool, depth: int) -> list[_Piece]:
        inner = [c for c in node.children if c.type not in ("${", "}")]
        if not inner or inner[0].type != "variable_name":
            return self._as_written(node)
        name = self._text(inner[0])
        if len(inner) == 1:
            return self._variable(node, name, None, k, quoted=quoted)
        operator = inner[1].type
        if operator not in _DEFAULTS:
            return self._as_written(node)
        default: list[_Piece] = []
        for part in inner[2:]:
            default.extend(self._word(part, k, quoted=quoted, depth=depth + 1))
        if operator in (":=", "=") and name not in self.env \
                and not any(p.unknown for p in default):
            self._set(name, (None, "".join(p.text for p in default)), spine=True)
        return self._variable(node, name, default, k, quoted=quoted)

    def _substitution(self, node: Node, k: int, *, quoted: bool, depth: int) -> list[_Piece]:
        """``$(echo words)``: the words (``-n`` dropped); anything else as written."""
        body = [c for c in node.children if c.type not in ("$(", ")", "`")]
        if len(body) != 1 or body[0].type != "command":
            return self._as_written(node)
        command = body[0]
        name = command.child_by_field_name("name")
        if name is None or self._text(name) != "echo" or any(
                c.type == "variable_assignment" for c in command.children):
            return self._as_written(node)
        words: list[str] = []
        for arg in command.children_by_field_name("argument"):
            pieces = self._word(arg, k, quoted=False, depth=depth + 1)
            if any(p.unknown for p in pieces):
                return self._as_written(node)
            words.extend(self._fields(pieces))
        while words and words[0] == "-n":
            words = words[1:]
        if words and words[0].startswith("-"):
            return self._as_written(node)  # -e, -E: escapes we do not decode here
        return [_Piece(" ".join(words), split=not quoted)]


_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
           "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v"}


def ansi_c(body: str) -> str:
    """``$'...'`` strings: escapes including ``\\x72`` and octal ``\\162`` decoded."""

    def sub(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] in "xX":
            return chr(int(s[1:], 16))
        if s[0] in "uU":
            return chr(int(s[1:], 16))
        if s[0].isdigit():
            return chr(int(s, 8) & 0xFF)
        return _ANSI_C.get(s, "\\" + s)

    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)",
                  sub, body)


#: what a backslash escapes inside double quotes (elsewhere it escapes every character)
_DQUOTE_ESCAPABLE = '$`"\\\n'


def _unescape(text: str, escapable: str | None = None) -> str:
    """``text`` without its backslash escapes: every one, or only those of the characters
    in ``escapable`` (inside double quotes: :data:`_DQUOTE_ESCAPABLE`)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "\\" and i + 1 < n and (escapable is None or text[i + 1] in escapable):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def expanded_commands(script: str) -> list[list[str]]:
    """Every simple command of ``script`` as words, in each statically known variant.

    A script over :data:`PARSE_BYTES` yields one command, :data:`UNPARSED`, which the
    ``unparsed`` pattern asks about: tree-sitter's error recovery is superlinear on some
    inputs (16 KiB of dangling ``x|`` took about a second here, 32 KiB fifteen, in one step
    its progress callback cannot cancel), and the host's GIL is held meanwhile.
    """
    source = script.encode("utf-8", "surrogatepass")
    if len(source) > PARSE_BYTES:
        return [[UNPARSED]]
    tree = Parser(_language()).parse(source)
    walk = _Pass(source)
    walk.walk(tree.root_node)
    return walk.commands
