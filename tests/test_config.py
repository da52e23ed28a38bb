import dataclasses

import pytest

from execengine import Config, ConfigError, _configload, load_config
from execengine._configload import find_config
from execengine.cli.config_cmd import reference_table
from execengine.config import (
    ApprovalsConfig,
    CodeExecutionConfig,
    ToolsetsConfig,
    iter_options,
    option_choices,
)
from execengine.config import parse_config as parse
from execengine.registry import ToolRegistry

ORIGINAL_DEFAULT_PATH = _configload.default_config_path


def write(tmp_path, text):
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return p


def test_defaults_match_the_documented_limits():
    c = Config()
    assert c.code_execution.timeout == 300
    assert c.code_execution.max_tool_calls == 50
    assert c.code_execution.max_stdout_bytes == 50_000
    assert c.code_execution.max_stderr_bytes == 10_000
    assert c.code_execution.mode == "project"
    assert c.code_execution.memory_mb == 1024
    assert c.code_execution.max_processes == 64


def test_config_is_immutable():
    c = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.code_execution.timeout = 1  # type: ignore[misc]


def test_values_and_origins(tmp_path):
    p = write(tmp_path, "code_execution:\n  timeout: 5\n  mode: strict\n"
                        "terminal:\n  env_passthrough: [FOO_TOKEN]\n")
    c = load_config(p)
    assert c.code_execution.timeout == 5.0
    assert isinstance(c.code_execution.timeout, float)
    assert c.code_execution.mode == "strict"
    assert c.terminal.env_passthrough == ("FOO_TOKEN",)
    assert c.origins["code_execution.timeout"] == f"{p}:2"
    assert "code_execution.max_tool_calls" not in c.origins
    assert c.source == str(p)


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("code_execution:\n  timout: 5\n", "code_execution.timout", "did you mean 'timeout'"),
        ("code_exec:\n  timeout: 5\n", "code_exec", "did you mean 'code_execution'"),
        ("code_execution:\n  timeout: soon\n", "code_execution.timeout", "expected a number"),
        ("code_execution:\n  max_tool_calls: 2.5\n", "code_execution.max_tool_calls",
         "expected an integer"),
        ("code_execution:\n  max_tool_calls: true\n", "code_execution.max_tool_calls",
         "expected an integer"),
        ("code_execution:\n  timeout: -3\n", "code_execution.timeout", "must be >= 0.1"),
        ("code_execution:\n  timeout: 1.0e+308\n", "code_execution.timeout", "must be <= 2592000"),
        ("code_execution:\n  timeout: .nan\n", "code_execution.timeout", "a finite number"),
        ("terminal:\n  timeout: .inf\n", "terminal.timeout", "a finite number"),
        ("code_execution:\n  kill_grace: 600\n", "code_execution.kill_grace", "must be <= 60"),
        ("code_execution:\n  mode: strikt\n", "code_execution.mode", "did you mean 'strict'"),
        ("code_execution:\n  network: 'yes'\n", "code_execution.network", "true or false"),
        ("code_execution: 5\n", "code_execution", "expected a mapping"),
        ("terminal:\n  env_passthrough: [1, 2]\n", "terminal.env_passthrough",
         "list of strings"),
        ("web:\n  searxng:\n    ur: x\n", "web.searxng.ur", "did you mean 'url'"),
        ("code_execution:\n  timeout: 1\n  timeout: 2\n", "code_execution.timeout",
         "duplicate key"),
        ("code_execution:\n  timeout: null\n", "code_execution.timeout", "got null"),
    ],
)
def test_bad_values_name_file_key_and_expectation(tmp_path, text, key, fragment):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    err = info.value
    assert err.key == key
    assert err.path == str(p)
    assert err.line is not None
    assert fragment in str(err)
    assert str(err).startswith(f"{p}:{err.line}:")


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    p = write(tmp_path, "code_execution:\n  timeout: [1,\n")
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert "YAML syntax error" in str(info.value)
    assert info.value.line == 3
    assert info.value.column is not None


def test_empty_file_and_null_section_mean_defaults(tmp_path):
    assert load_config(write(tmp_path, "")) == Config()
    assert load_config(write(tmp_path, "web:\n")) == Config()


def test_missing_explicit_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")


def test_search_order(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".execengine").mkdir(parents=True)
    home_cfg = home / ".execengine" / "config.yaml"
    home_cfg.write_text("code_execution: {timeout: 7}\n")
    env_cfg = write(tmp_path, "code_execution: {timeout: 8}\n")
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("code_execution: {timeout: 9}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("EXECENGINE_CONFIG", raising=False)
    # the suite points the home default elsewhere (tests/conftest.py); this test is about it
    monkeypatch.setattr(_configload, "default_config_path", ORIGINAL_DEFAULT_PATH)
    assert load_config().code_execution.timeout == 7
    monkeypatch.setenv("EXECENGINE_CONFIG", str(env_cfg))
    assert load_config().code_execution.timeout == 8
    assert load_config(explicit).code_execution.timeout == 9
    home_cfg.unlink()
    monkeypatch.delenv("EXECENGINE_CONFIG")
    assert find_config() == (None, "no file (defaults)")
    assert load_config() == Config()


def test_overrides_are_validated_and_recorded():
    c = Config().with_overrides({"code_execution.timeout": 3, "web.searxng.url": "http://x"},
                                origin="command line")
    assert c.code_execution.timeout == 3.0
    assert c.web.searxng.url == "http://x"
    assert c.origins["code_execution.timeout"] == "command line"
    with pytest.raises(ConfigError, match="did you mean 'timeout'"):
        Config().with_overrides({"code_execution.timout": 3})
    with pytest.raises(ConfigError, match="must be >= 0.1"):
        Config().with_overrides({"code_execution.timeout": 0})
    with pytest.raises(ConfigError, match="unknown section"):
        Config().with_overrides({"nope.timeout": 0})


def test_every_option_has_a_doc():
    for key, f in iter_options():
        assert f.metadata.get("doc"), key


def test_parse_of_string_source():
    c = parse("approvals:\n  mode: deny\n", source="inline")
    assert c.approvals.mode == "deny"


# -- validation in code, Literal choices, errors at the key ----------------------------------


@pytest.mark.parametrize(
    ("build", "key", "fragment"),
    [
        (lambda: CodeExecutionConfig(timeout=-1), "code_execution.timeout", "must be >= 0.1"),
        (lambda: CodeExecutionConfig(mode="fast"), "code_execution.mode",  # type: ignore[arg-type]
         "expected one of 'project', 'strict'"),
        (lambda: CodeExecutionConfig(max_tool_calls="5"), "code_execution.max_tool_calls",  # type: ignore[arg-type]
         "expected an integer"),
        (lambda: ApprovalsConfig(mode="maybe"), "approvals.mode", "expected one of"),  # type: ignore[arg-type]
        (lambda: Config(code_execution={"timeout": 5}), "code_execution",  # type: ignore[arg-type]
         "expected a CodeExecutionConfig"),
    ],
)
def test_config_built_in_code_is_validated_like_yaml(build, key, fragment):
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.key == key and fragment in str(info.value)


def test_code_built_values_are_coerced_like_yaml():
    c = CodeExecutionConfig(timeout=5)
    assert c.timeout == 5.0 and isinstance(c.timeout, float)
    assert ToolsetsConfig(enabled=["web"]).enabled == ("web",)  # type: ignore[arg-type]
    assert Config().with_overrides({"code_execution.mode": "strict"}).code_execution.mode == \
        "strict"


def test_choices_are_literal_types():
    assert option_choices(CodeExecutionConfig, "mode") == ("project", "strict")
    assert option_choices(CodeExecutionConfig, "min_isolation") == (
        None, "none", "restricted", "isolated")
    assert option_choices(CodeExecutionConfig, "timeout") is None
    assert "(project / strict)" in reference_table()


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("code_execution:\n  timeout: -1\n", 2, 3),          # the key, not the value (col 12)
        ("code_execution:\n  timeout:\n    -1\n", 2, 3),      # value on the next line
        ("code_execution:\n  mode:\n    - a\n", 2, 3),
        ("web:\n  searxng: 5\n", 2, 3),                       # a section that is no mapping
    ],
)
def test_errors_point_at_the_key(tmp_path, text, line, column):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert (info.value.line, info.value.column) == (line, column)


def test_unknown_mode_is_an_error_not_a_warning():
    from execengine.engine import Engine
    from execengine.launch.local import LocalLauncher

    with Engine(Config(), ToolRegistry(), launcher=LocalLauncher()) as engine, \
            pytest.raises(ConfigError, match="unknown mode 'fast'"):
        engine.execute("print(1)", mode="fast")  # type: ignore[arg-type]
