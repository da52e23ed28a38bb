"""Composing YAML within bounds: nesting depth and values once aliases are expanded."""

from __future__ import annotations

import pytest
import yaml

from execengine import _yamlbound
from execengine._yamlbound import MAX_DEPTH, compose
from execengine.config import parse_config
from execengine.errors import ConfigError


def laughs(levels: int, width: int = 9) -> str:
    """Aliases nested ``levels`` deep, ``width`` to a level: ``width ** levels`` values."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_the_graph_is_what_yaml_composes():
    text = "a: &x [1, {b: 2}]\nc: *x\nd: 'e'\n"
    ours, theirs = compose(text), yaml.compose(text, Loader=yaml.SafeLoader)
    assert yaml.serialize(ours) == yaml.serialize(theirs)
    assert compose("") is None


def test_aliases_within_the_budget_are_fine():
    node = compose(laughs(4))  # 9 ** 4 = 6,561 values
    assert isinstance(node, yaml.MappingNode)


def test_an_alias_bomb_is_refused_where_it_crosses_the_budget():
    with pytest.raises(ConfigError, match="more than 100,000 values") as info:
        compose(laughs(9), source="bomb.yaml")  # 387 million values expanded
    err = info.value
    # 9 ** 6 = 531,441 > 100,000: the alias that crossed is on the 6th line
    assert (err.path, err.line) == ("bomb.yaml", 6) and err.column is not None
    assert len(str(err)) < 300


def test_the_budget_counts_every_value_once_expanded(monkeypatch):
    monkeypatch.setattr(_yamlbound, "MAX_VALUES", 1000)  # the same rule, 100 times cheaper
    # one anchor of half the bound's values used twice (with the keys and the top
    # mapping): just over; a quarter: well under
    text = "a: &a [{}]\nb: *a\n".format(", ".join(["x"] * 500))
    with pytest.raises(ConfigError, match="more than 1,000 values"):
        compose(text)
    assert compose("a: &a [{}]\nb: *a\n".format(", ".join(["x"] * 250))) is not None


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_is_bounded(style):
    """Every node counts as a level: the top mapping, each list, the innermost value."""
    def nest(lists: int) -> str:
        if style == "flow":  # the innermost list is empty
            return "x: " + "[" * lists + "]" * lists + "\n"
        return "x:\n" + "".join(" " * (2 * i) + "-\n" for i in range(lists - 1)) \
            + " " * (2 * lists - 2) + "- 1\n"  # the innermost holds a value

    fits = MAX_DEPTH - 1 if style == "flow" else MAX_DEPTH - 2
    assert compose(nest(fits)) is not None
    with pytest.raises(ConfigError, match=f"deeper than {MAX_DEPTH} levels"):
        compose(nest(fits + 1))


def test_a_hundred_thousand_levels_are_an_error_not_a_recursion_error():
    text = "code_execution:\n  allowed: " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(ConfigError, match="deeper than") as info:
        parse_config(text, source="deep.yaml")
    assert info.value.line == 2 and info.value.path == "deep.yaml"


def test_an_alias_to_its_own_ancestor_is_refused():
    with pytest.raises(ConfigError, match="contains it"):
        compose("a: &a [1, *a]\n")
