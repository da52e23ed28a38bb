import json
import sys
import textwrap

from execengine import Config, ToolRegistry
from execengine.discovery import BUILTIN_TOOL_MODULES, load_builtin_tools, load_plugins

SCHEMA = {"description": "x", "parameters": {"type": "object", "properties": {}}}


def test_builtin_tool_modules_are_listed_explicitly():
    import pkgutil

    import execengine.tools

    modules = {f"execengine.tools.{m.name}" for m in pkgutil.iter_modules(
        execengine.tools.__path__) if not m.name.startswith("_")}
    assert set(BUILTIN_TOOL_MODULES) == modules  # a new tool module must be listed
    with ToolRegistry() as reg:
        assert load_builtin_tools(reg) == list(BUILTIN_TOOL_MODULES) and not reg.load_errors


def test_builtin_tools_load_and_a_failing_module_is_skipped(tmp_path, monkeypatch):
    pkg = tmp_path / "fake_tools_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text(textwrap.dedent("""
        from execengine.discovery import ToolSpecs
        specs = ToolSpecs()
        specs.register("good", "demo", {"parameters": {"type": "object"}},
                       lambda a, c: "fine")
    """))
    (pkg / "bad.py").write_text("import does_not_exist_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("execengine.discovery.BUILTIN_TOOL_MODULES",
                        ("fake_tools_pkg.bad", "fake_tools_pkg.good"))
    reg = ToolRegistry()
    loaded = load_builtin_tools(reg)
    assert loaded == ["fake_tools_pkg.good"]
    assert reg.dispatch("good", {}) == "fine"
    assert "ModuleNotFoundError" in reg.load_errors["fake_tools_pkg.bad"]
    assert reg.get("good").source == "fake_tools_pkg.good"
    for name in list(sys.modules):
        if name.startswith("fake_tools_pkg"):
            del sys.modules[name]


PLUGIN = textwrap.dedent("""
    def register(ctx):
        ctx.register_tool("{name}", "plugged", {{"parameters": {{"type": "object"}}}},
                          lambda a, c: {{"from": "{name}"}})
        ctx.register_toolset("plugged_set", "a plugin toolset", includes=["plugged"])
        ctx.register_hook("post_tool_call", lambda n, a, r, c: r)
        ctx.register_env_passthrough(["PLUGIN_TOKEN"])
        ctx.register_schema_patch(lambda s, c: s)
""")


def test_plugin_directory(tmp_path):
    plugdir = tmp_path / "plugins"
    plugdir.mkdir()
    (plugdir / "one.py").write_text(PLUGIN.format(name="one_tool"))
    pkg = plugdir / "two"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN.format(name="two_tool"))
    (plugdir / "broken.py").write_text("raise RuntimeError('plugin exploded')\n")
    (plugdir / "noreg.py").write_text("X = 1\n")
    (plugdir / "skipped.py").write_text(PLUGIN.format(name="skipped_tool"))
    cfg = Config().with_overrides({"plugins.directory": str(plugdir),
                                   "plugins.entry_points": False,
                                   "plugins.disabled": ["skipped"]})
    reg = ToolRegistry(cfg)
    assert load_plugins(reg) == ["one", "two"]
    assert json.loads(reg.dispatch("one_tool", {})) == {"from": "one_tool"}
    assert json.loads(reg.dispatch("two_tool", {})) == {"from": "two_tool"}
    assert "skipped_tool" not in reg
    assert "plugin exploded" in reg.load_errors["plugin broken"]
    assert "no register(ctx)" in reg.load_errors["plugin noreg"]
    assert reg.resolve_toolsets(["plugged_set"]) == {"one_tool", "two_tool"}
    assert "PLUGIN_TOKEN" in reg.env_passthrough
    assert reg.get("one_tool").source == "plugin one"


def test_entry_point_plugins(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "ep_plugin_mod").mkdir(parents=True)
    (site / "ep_plugin_mod" / "__init__.py").write_text(PLUGIN.format(name="ep_tool"))
    dist = site / "ep_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[execengine.plugins]\nep = ep_plugin_mod:register\n")
    monkeypatch.syspath_prepend(str(site))
    reg = ToolRegistry(Config())
    assert "ep" in load_plugins(reg)
    assert json.loads(reg.dispatch("ep_tool", {})) == {"from": "ep_tool"}
    sys.modules.pop("ep_plugin_mod", None)


def test_missing_plugin_directory_is_reported(tmp_path):
    cfg = Config().with_overrides({"plugins.directory": str(tmp_path / "nope"),
                                   "plugins.entry_points": False})
    reg = ToolRegistry(cfg)
    assert load_plugins(reg) == []
    assert "not a directory" in reg.load_errors["plugins.directory"]
