"""The built-in workflows: six or seven in each of the four families (5 to 100 tool calls
each, most with a shell strategy beside the naive one), and four small ones (1-3 calls) where
execute_code does not pay."""

from __future__ import annotations

from execengine.bench.suite import build, data, refactor, research, small
from execengine.bench.workflow import Workflow

#: every built-in workflow, by family then size
WORKFLOWS: tuple[Workflow, ...] = (*data.WORKFLOWS, *research.WORKFLOWS, *refactor.WORKFLOWS,
                                   *build.WORKFLOWS, *small.WORKFLOWS)
#: a small cross-section, one per family, for ``--quick``
QUICK = ("ports-by-region-4", "license-check-database-4", "inventory-functions-5",
         "diagnose-failures", "count-services")


def by_name() -> dict[str, Workflow]:
    return {wf.name: wf for wf in WORKFLOWS}
