"""Isolation cost: ``print("hi")`` end to end at each level, beside level ``none`` and a
bare interpreter spawn, all measured in the same run.

    python benchmarks/bench_isolation.py [--runs N]

Also the launcher alone (``python -I -S -c pass`` through each launcher, no engine), which
isolates what the sandbox entry itself costs.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

from execengine.config import Config
from execengine.engine import Engine
from execengine.isolation import detect, make_launcher
from execengine.launch.base import Launcher, LaunchSpec

LEVELS = ("none", "restricted", "isolated")


def _median_ms(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.9) - 1] * 1000


def bare_spawn(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        out.append(time.perf_counter() - t)
    return out


def launcher_only(launcher: Launcher, runs: int, cwd: str) -> list[float]:
    out = []
    for _ in range(runs):
        token = secrets.token_hex(8)
        spec = LaunchSpec(argv=[sys.executable, "-I", "-S", "-c", "pass"],
                          env={"EXECENGINE_RUN_TOKEN": token}, cwd=cwd, run_token=token,
                          writable_paths=(cwd,))
        t = time.perf_counter()
        with launcher.launch(spec) as child:
            child.wait(30)
        out.append(time.perf_counter() - t)
    return out


def end_to_end(engine: Engine, runs: int, cwd: str) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        r = engine.execute('print("hi")', mode="project", cwd=cwd)
        out.append(time.perf_counter() - t)
        assert r.output.strip() == "hi", (r.status, r.error)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    report = detect()
    levels = [lv for lv in LEVELS if report.levels.get(lv)]
    print(f"levels available: {', '.join(levels)} (auto: {report.best})")
    bare, _ = _median_ms(bare_spawn(args.runs))
    print(f"bare interpreter spawn (-I -S -c pass): {bare:7.2f} ms\n")
    rows = []
    with tempfile.TemporaryDirectory() as cwd:
        for level in levels:
            cfg = Config().with_overrides({"code_execution.isolation": level})
            launcher = make_launcher(cfg)
            with Engine(config=cfg, launcher=launcher) as engine:
                end_to_end(engine, 3, cwd)  # warm-up (spawner start, probes)
                launcher_only(launcher, 3, cwd)
                spawn = _median_ms(launcher_only(launcher, args.runs, cwd))
                e2e = _median_ms(end_to_end(engine, args.runs, cwd))
            rows.append((level, spawn, e2e))
    base_spawn, base_e2e = rows[0][1][0], rows[0][2][0]
    print(f"{'level':<11}{'launch pass':>14}{'x bare':>8}{'print(hi) e2e':>16}"
          f"{'p90':>9}{'vs none':>9}{'+ms':>8}")
    for level, (sp, _), (e2e, p90) in rows:
        print(f"{level:<11}{sp:11.2f} ms{sp / bare:8.2f}{e2e:13.2f} ms{p90:9.2f}"
              f"{e2e / base_e2e:9.2f}{e2e - base_e2e:8.2f}")
    print(f"\n(launch pass: none = {base_spawn:.2f} ms)")


if __name__ == "__main__":
    main()
