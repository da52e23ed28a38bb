import execengine


def test_all_is_sorted_and_complete():
    assert execengine.__all__ == sorted(execengine.__all__)
    assert set(execengine.__all__) == {*execengine._EXPORTS, "__version__"}
    for name in execengine.__all__:
        assert getattr(execengine, name) is not None, name
    assert "Engine" in dir(execengine)


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        execengine.nope  # noqa: B018


def test_public_names_are_pinned():
    # Changing the public API is a decision: update this list on purpose.
    assert set(execengine.__all__) == {
        "ApprovalRequest", "Approver", "Availability", "CallContext", "CallbackApprover",
        "ChatCompletionsClient", "Child", "Config", "ConfigError", "ConversationResult",
        "Engine", "ExecEngineError", "ExecutionResult", "FileOpError", "HandshakeError",
        "IsolationError", "LaunchLimits", "LaunchSpec", "Launcher", "ModelError", "PluginError",
        "PolicyApprover", "PromptApprover", "Refuse", "SandboxError", "SchemaError",
        "SmartApprover", "TerminalError", "ToolCallPipeline", "ToolConflictError",
        "ToolContext", "ToolEntry", "ToolError", "ToolPolicy", "ToolRegistry", "ToolSpecs",
        "Toolset",
        "TransportError", "UnknownToolError", "UnknownToolsetError", "WebError", "__version__",
        "aexecute_code", "check_command", "default_registry", "execute_code",
        "get_tool_definitions", "handle_function_call", "install_agent_handlers", "load_config",
        "make_launcher", "repair_transcript", "run_conversation",
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
