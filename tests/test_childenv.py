from execengine.childenv import build_child_env, looks_secret

HOST = {
    "PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C", "XDG_RUNTIME_DIR": "/r",
    "OPENAI_API_KEY": "sk-1", "GITHUB_TOKEN": "t", "DB_PASSWORD": "p", "SENTRY_DSN": "d",
    "SLACK_WEBHOOK_URL": "w", "XDG_SECRET": "s", "CONDA_AUTH": "c", "AWS_SECRET_ACCESS_KEY": "a",
    "BYPASS_CACHE": "1", "RANDOM_VAR": "r", "LD_PRELOAD": "/evil.so", "PYTHONSTARTUP": "/x.py",
    "VIRTUAL_ENV": "/venv", "CONDA_PREFIX": "/conda",
}


def test_allow_list_not_inherit_then_filter():
    env = build_child_env(HOST)
    assert env["PATH"] == "/usr/bin"
    assert env["LC_ALL"] == "C"
    assert env["XDG_RUNTIME_DIR"] == "/r"
    assert env["VIRTUAL_ENV"] == "/venv"
    assert env["CONDA_PREFIX"] == "/conda"
    for dropped in ("OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "SENTRY_DSN",
                    "SLACK_WEBHOOK_URL", "XDG_SECRET", "CONDA_AUTH", "AWS_SECRET_ACCESS_KEY",
                    "BYPASS_CACHE", "RANDOM_VAR", "LD_PRELOAD", "PYTHONSTARTUP"):
        assert dropped not in env, dropped


def test_passthrough_wins_and_fixed_values_are_added():
    env = build_child_env(HOST, passthrough=["GITHUB_TOKEN", "NOT_SET"], tz="Europe/Paris",
                          extra={"PYTHONPATH": "/stage"})
    assert env["GITHUB_TOKEN"] == "t"
    assert "NOT_SET" not in env
    assert env["TZ"] == "Europe/Paris"
    assert env["PYTHONPATH"] == "/stage"
    assert env["PYTHONUTF8"] == "1"
    assert env["PYTHONIOENCODING"] == "utf-8"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_pass_alone_is_not_secret():
    assert not looks_secret("BYPASS_PROXY")
    assert looks_secret("my_apikey")
