import json
import subprocess
import sys

import pytest

from execengine.cli import main


@pytest.fixture(autouse=True)
def no_home_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("EXECENGINE_CONFIG", raising=False)


@pytest.fixture
def config(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("code_execution:\n  isolation: none\n  kill_grace: 0.5\n  mode: strict\n")
    return str(cfg)


def test_batch_runs_locally_and_resumes(capsys, tmp_path, config, no_leftover_children):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    tasks.write_text(json.dumps({"id": "a", "code": "print('A')"}) + "\n"
                     + json.dumps({"id": "b", "code": "raise SystemExit(2)"}) + "\n"
                     + "oops\n")
    argv = ["--config", config, "batch", str(tasks), "--out", str(out), "--concurrency", "2"]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"] == {"success": 1, "error": 1, "invalid": 1}
    assert summary["done"] == 3 and not summary["stopped"]
    recs = {r["line"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert recs[1]["output"] == "A\n" and recs[2]["exit_code"] == 2
    assert recs[3]["error"].startswith("line 3: not valid JSON")
    assert main(argv) == 0  # again: everything is recorded already
    err = capsys.readouterr().err
    assert "3 already in the results file (skipped)" in err
    assert len(out.read_text().splitlines()) == 3


def test_a_deep_line_is_invalid_the_others_run_and_reruns_skip_them(
        capsys, tmp_path, config, no_leftover_children):
    """Issue 40: a line nested 1,100 levels deep ended the batch with a RecursionError on
    every rerun; a complete last record without its newline was run again on resume."""
    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    deep = '{"id": "deep", "code": "print(1)", "meta": ' + "[" * 1100 + "]" * 1100 + "}"
    tasks.write_text(json.dumps({"id": "a", "code": "print('A')"}) + "\n" + deep + "\n"
                     + json.dumps({"id": "b", "code": "print('B')"}) + "\n")
    argv = ["--config", config, "batch", str(tasks), "--out", str(out), "--concurrency", "2",
            "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"] == {"success": 2, "invalid": 1}
    recs = {r["line"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert recs[2]["status"] == "invalid" and "nests deeper than 100 levels" in recs[2]["error"]
    assert recs[1]["output"] == "A\n" and recs[3]["output"] == "B\n"
    # the results file loses its final newline (an editor, a copy): nothing runs again
    out.write_bytes(out.read_bytes().rstrip(b"\n"))
    tasks.write_text(tasks.read_text() + json.dumps({"id": "c", "code": "print('C')"}) + "\n")
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"] == {"success": 1} and summary["skipped"] == 3
    lines = out.read_text().splitlines()
    assert sorted(json.loads(line)["line"] for line in lines) == [1, 2, 3, 4]


def test_bad_arguments_are_clear_errors(capsys, tmp_path, config):
    out = str(tmp_path / "r.jsonl")
    assert main(["--config", config, "batch", str(tmp_path / "none.jsonl"), "--out", out]) == 2
    assert "cannot read tasks file" in capsys.readouterr().err
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("")
    assert main(["--config", config, "batch", str(tasks), "--out", out,
                 "--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err


def test_without_ray_installed_local_batches_run_and_ray_asks_for_the_extra(tmp_path, config):
    """A child where `import ray` fails, as when the extra is not installed."""
    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    tasks.write_text(json.dumps({"id": "a", "code": "print(1)"}) + "\n")
    probe = (
        "import sys\n"
        "sys.modules['ray'] = None  # import ray -> ImportError\n"
        "from execengine.cli import main\n"
        f"local = main(['--config', {config!r}, 'batch', {str(tasks)!r}, '--out', "
        f"{str(out)!r}])\n"
        f"on_ray = main(['--config', {config!r}, 'batch', {str(tasks)!r}, '--out', "
        f"{str(out)!r}, '--ray', 'auto'])\n"
        "print(local, on_ray)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.stdout.split() == ["0", "2"], done.stderr
    assert "pip install 'execengine[ray]'" in done.stderr
    assert json.loads(out.read_text())["status"] == "success"


def test_importing_the_batch_package_does_not_import_ray():
    probe = ("import sys, execengine.batch, execengine.cli.batch_cmd\n"
             "print('ray' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "False", done.stderr
