"""Composing YAML with bounds on nesting and on what aliases expand to.

A 300-byte file of aliases nested 9 deep, 9 to a level ("billion laughs"), is 387 million
values once expanded, and PyYAML's composer recurses once per level of nesting (a file
100,000 levels deep is a ``RecursionError``). :func:`compose` builds the same node graph
as ``yaml.compose`` but counts, while composing, how many values the document holds with
every alias expanded (an alias costs what its anchor holds, without expanding anything)
and how deep it nests; past either bound it raises :class:`~execengine.errors.ConfigError`
at the line and column where the bound was crossed. Nothing is constructed here.
"""

from __future__ import annotations

from typing import Any

import yaml

from execengine.errors import ConfigError

#: deepest nesting of lists and mappings (a config file needs about 5)
MAX_DEPTH = 100
#: most values (scalars, lists, mappings, keys included) in a document once every alias
#: is expanded
MAX_VALUES = 100_000


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` whose composer counts depth and expanded values (see the module)."""

    source = "<string>"

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        #: values held by the nodes being composed, innermost last (the depth is its length)
        self._held: list[int] = []
        #: values an anchored node holds, expanded; absent while it is being composed
        self._anchored: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)  # the anchor's node, or its error
            held = self._anchored.get(id(node))
            if held is None:
                raise self._error("an alias refers to a value that contains it", event)
            self._add(held, event)
            return node
        if len(self._held) >= MAX_DEPTH:
            raise self._error(f"values nest deeper than {MAX_DEPTH} levels", event)
        self._held.append(1)
        try:
            node = super().compose_node(parent, index)
        finally:
            held = self._held.pop()
        if event.anchor is not None:
            self._anchored[id(node)] = held
        self._add(held, event)
        return node

    def _add(self, held: int, event: yaml.Event) -> None:
        if not self._held:
            return
        self._held[-1] += held
        if self._held[-1] > MAX_VALUES:
            raise self._error(f"the document holds more than {MAX_VALUES:,} values once its "
                              "aliases are expanded (an alias bomb?)", event)

    def _error(self, message: str, event: yaml.Event) -> ConfigError:
        mark = event.start_mark
        if mark is None:
            return ConfigError(message, path=self.source)
        return ConfigError(message, path=self.source, line=mark.line + 1,
                           column=mark.column + 1)


def compose(text: str, source: str = "<string>") -> yaml.Node | None:
    """``yaml.compose(text, Loader=yaml.SafeLoader)`` within :data:`MAX_DEPTH` and
    :data:`MAX_VALUES`; ``ConfigError`` past them, ``yaml.YAMLError`` for bad YAML."""
    loader = _BoundedLoader(text)
    loader.source = source
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()
