"""What a benchmark workflow is: one task, described once, runnable two ways, with its answer.

A :class:`Workflow` gives

- ``plan(fx)``: the *sequential* agent, as a generator. It yields a batch of tool calls
  (a list of :class:`Call`: the calls one assistant message makes, every call that does not
  depend on another one's result batched together as a model issuing parallel tool calls
  does), receives the decoded results of that batch (a list, in order: JSON results as
  dicts, other text as str), decides what to call next from them like a model would, and
  finally returns its answer. The *serial* worst case makes the same calls one per message;
- ``script(fx)``: the *programmatic* way, a self-contained Python script for
  ``execute_code`` making the same tool calls with ``from hermes_tools import ...`` and
  parsing their results with its own code; its last printed line is the answer as JSON;
- ``truth(fx)``: the expected answer, computed from the generated records
  (:attr:`Fixtures.truth`), never from what a tool returns;
- ``check(expected, answer)``: the comparison (default: equal after a JSON round trip, so
  tuples and lists compare alike).

A workflow may offer other :class:`Strategy` pairs (``alternatives``): another plan for the
same task with the offered tools (one ``grep`` over every file instead of reading each) and
the script that makes that plan's calls. Its first pair, ``plan`` and ``script``, is the
*naive* strategy. The headline compares the cheapest plan with the cheapest script; the naive
pair alone, whose calls are the same both ways, is the *matched-calls* ablation.

``cluster`` names a group of near-duplicate workflows (the same question at another size);
the report counts a cluster once.

``fx`` is the :class:`~execengine.bench.fixtures.Fixtures` the run uses. Paths in calls are
relative to the fixtures' root, which is the task's working directory both ways.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execengine._runtime import runtime_module
from execengine.errors import WorkflowError

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

#: ``small``: tasks of 1-3 calls, where execute_code is not worth it
FAMILIES = ("data", "research", "refactor", "build", "small")
#: the name of a workflow's first strategy (its ``plan`` and ``script``)
NAIVE = "naive"

Plan = Generator[list["Call"], list[Any], Any]


@dataclass(frozen=True)
class Call:
    """One tool call the model makes."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


def call(tool: str, **args: Any) -> Call:
    return Call(tool, args)


def same_answer(a: Any, b: Any) -> bool:
    """Equal after a JSON round trip (tuples and lists alike, dict order ignored)."""
    return bool(normalize(a) == normalize(b))


def normalize(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def decode_result(text: str) -> Any:
    """A tool's result text as a script sees it: the child runtime's own decoding (JSON
    decoded, twice when the JSON is itself a JSON string; anything else as the text)."""
    return runtime_module("client").decode_result(text)


def answer_from_output(output: str) -> Any:
    """The answer a script printed: its last non-empty line, as JSON."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if not lines:
        raise WorkflowError("the script printed nothing")
    try:
        return json.loads(lines[-1])
    except ValueError as exc:
        raise WorkflowError(f"the script's last line is not JSON: {lines[-1][:200]!r}") from exc


@dataclass(frozen=True)
class Strategy:
    """One way to do a task: a sequential plan and the script that makes the same calls."""

    name: str
    plan: Callable[[Fixtures], Plan]
    script: Callable[[Fixtures], str]


@dataclass(frozen=True)
class Workflow:
    name: str
    family: str
    task: str
    plan: Callable[[Fixtures], Plan]
    script: Callable[[Fixtures], str]
    #: the expected answer from the generated records (None: unchecked, user workflows only)
    truth: Callable[[Fixtures], Any] | None = None
    check: Callable[[Any, Any], bool] = same_answer
    #: the shape of the answer, told to a live model (``bench tokens --model``)
    answer_format: str = ""
    toolsets: tuple[str, ...] = ("file", "terminal")
    #: the workflow edits ``proj/``: the runner restores it before each way
    mutates: bool = False
    #: where it came from (a file, for user workflows)
    source: str = ""
    #: other strategies for the same task (the first one is ``plan`` and ``script``)
    alternatives: tuple[Strategy, ...] = ()
    #: near-duplicate workflows share a cluster, counted once (default: the name)
    cluster: str = ""

    @property
    def group(self) -> str:
        return self.cluster or self.name

    def strategies(self) -> list[Strategy]:
        """The naive strategy, then the alternatives."""
        return [Strategy(NAIVE, self.plan, self.script), *self.alternatives]

    def task_for(self, fx: Fixtures) -> str:
        """The task with the fixtures' names filled in (``{first_config}`` and the like)."""
        text = self.task
        for key, value in fx.task_vars().items():
            text = text.replace("{" + key + "}", value)
        return text

    def prompt(self, fx: Fixtures) -> str:
        """The user message: the task and how to give the answer (the same for the built-in
        ways and a live model)."""
        shape = f" Shape: {self.answer_format}." if self.answer_format else ""
        return (f"{self.task_for(fx)}\n\nWhen you are done, give the answer as JSON on the "
                f"last line of your final message, and nothing after it.{shape}")

    def __post_init__(self) -> None:
        where = f" ({self.source})" if self.source else ""
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise WorkflowError(f"workflow name {self.name!r}{where}: use letters, digits, - and _")
        if self.family not in FAMILIES:
            raise WorkflowError(f"workflow {self.name!r}{where}: family {self.family!r} is not "
                                f"one of {', '.join(FAMILIES)}")
        if not callable(self.plan) or not callable(self.script):
            raise WorkflowError(f"workflow {self.name!r}{where}: plan and script must be callable")
        names = [s.name for s in self.strategies()]
        if len(set(names)) != len(names):
            raise WorkflowError(f"workflow {self.name!r}{where}: strategy names repeat: "
                                f"{', '.join(names)}")


def batches(calls: Sequence[Call | Sequence[Call]]) -> list[list[Call]]:
    """Normalise a flat list of calls (one per message) or a list of batches."""
    out: list[list[Call]] = []
    for item in calls:
        out.append([item] if isinstance(item, Call) else list(item))
    return out
