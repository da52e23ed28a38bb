import execengine


def test_all_is_sorted_and_complete():
    assert execengine.__all__ == sorted(execengine.__all__)
    for name in execengine.__all__:
        assert hasattr(execengine, name), name


def test_public_names_are_pinned():
    # Changing the public API is a decision: update this list on purpose.
    assert set(execengine.__all__) == {
        "Availability", "Config", "ConfigError", "ExecEngineError", "HandshakeError",
        "IsolationError", "PluginError", "Refuse", "SandboxError", "SchemaError",
        "ToolConflictError", "ToolContext", "ToolEntry", "ToolError", "ToolRegistry",
        "ToolSpecs", "Toolset", "TransportError", "UnknownToolError", "UnknownToolsetError",
        "__version__", "load_config",
    }


def test_import_does_no_io(tmp_path):
    # A fresh interpreter importing execengine must not open files outside the package
    # and the standard library, nor read the config.
    import subprocess
    import sys

    code = (
        "import sys, builtins\n"
        "opened = []\n"
        "real = builtins.open\n"
        "def spy(f, *a, **k):\n"
        "    opened.append(str(f)); return real(f, *a, **k)\n"
        "builtins.open = spy\n"
        "import execengine\n"
        "print(opened)\n"
    )
    env = {"HOME": str(tmp_path), "EXECENGINE_CONFIG": str(tmp_path / "nope.yaml"),
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"
