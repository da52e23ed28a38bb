import pytest

from execengine import ToolError, ToolRegistry, UnknownToolsetError
from execengine.toolsets import Toolset, resolve

SCHEMA = {"description": "x", "parameters": {"type": "object", "properties": {}}}


def test_recursive_resolution_deduplicates():
    sets = {
        "a": Toolset("a", "", tools=("t1",), includes=("b", "c")),
        "b": Toolset("b", "", tools=("t2",), includes=("c",)),
        "c": Toolset("c", "", tools=("t1", "t3")),
    }
    assert resolve(["a"], sets, {}, []) == {"t1", "t2", "t3"}


def test_cycles_are_reported_with_the_path():
    sets = {
        "a": Toolset("a", "", includes=("b",)),
        "b": Toolset("b", "", includes=("c",)),
        "c": Toolset("c", "", includes=("a",)),
    }
    with pytest.raises(ToolError, match="a -> b -> c -> a"):
        resolve(["a"], sets, {}, [])


def test_all_and_star_and_legacy_names():
    sets = {"file": Toolset("file", "")}
    assert resolve(["*"], sets, {}, ["x", "y"]) == {"x", "y"}
    assert resolve(["all"], sets, {}, ["x"]) == {"x"}
    assert resolve(["file_tools"], sets, {"file": ["read_file"]}, []) == {"read_file"}


def test_unknown_names_suggest_and_name_the_includer():
    sets = {"file": Toolset("file", ""), "dev": Toolset("dev", "", includes=("fiel",))}
    with pytest.raises(UnknownToolsetError, match="did you mean 'file'"):
        resolve(["fiel"], sets, {}, [])
    with pytest.raises(UnknownToolsetError, match="included by 'dev'"):
        resolve(["dev"], sets, {}, [])


def test_builtin_presets_compose():
    reg = ToolRegistry()
    reg.register("read_file", "file", SCHEMA, lambda a, c: "")
    reg.register("terminal", "terminal", SCHEMA, lambda a, c: "")
    reg.register("web_search", "web", SCHEMA, lambda a, c: "")
    assert reg.resolve_toolsets(["coding"]) == {"read_file", "terminal"}
    assert reg.resolve_toolsets(["research"]) == {"read_file", "web_search"}
    for name in ("file", "terminal", "web", "code_execution"):
        assert name in reg.toolsets


def test_plugin_toolsets_can_be_added_but_not_silently_replaced():
    reg = ToolRegistry()
    reg.register_toolset(Toolset("mine", "plugin set", tools=("x",)))
    with pytest.raises(ToolError, match="already declared"):
        reg.register_toolset(Toolset("mine", "other", tools=("y",)))
