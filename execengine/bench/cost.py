"""What a run costs as a provider bills it: cached and uncached input, cache writes, output.

Prices come from ``prices.yaml`` beside this module (each sheet with its source, the date it
was retrieved, the tokenizer the provider counts with and the framing it documents), or from
a file of the same shape. A session's requests are billed one by one:

- with a **warm** cache (the default) a request reads from the cache the longest prefix it
  shares with an earlier request: the previous request of the session, or, for the first
  request, the fixed prefix (system prompt and tool definitions) earlier sessions sent; the
  prefix counts only from the provider's minimum, in its steps;
- with a **cold** cache the first request reads nothing;
- with caching **off** nothing is read or written;
- providers that bill cache writes (``cache_write``) write every prompt token not read from
  the cache (a cache breakpoint at the end of each request, as agents place it); those tokens
  are billed at the write price instead of the input price;
- output tokens are billed at the output price;
- a sheet's ``tool_system_tokens`` (the system prompt a provider adds to every request that
  offers tools, as Anthropic documents per model) are added to every request's prompt, and
  cached like the rest of the prefix;
- ``reasoning`` tokens per model call (a reasoning model's hidden output) are billed as
  output and never enter the context (as reasoning models' chat APIs drop them between
  requests). A sheet of a reasoning model carries a default (``reasoning_tokens``); the
  caller may give another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from execengine.errors import BenchError

CACHE_MODES = ("warm", "cold", "off")
_KEYS = {"provider", "input", "cached_input", "cache_write", "output", "cache_min", "cache_step",
         "source", "retrieved", "tokenizer", "tool_system_tokens", "tool_system_source",
         "reasoning_tokens", "reasoning_source"}


@dataclass(frozen=True)
class PriceSheet:
    """One model's prices, USD per million tokens."""

    name: str
    provider: str
    input: float
    cached_input: float
    output: float
    cache_write: float | None = None
    cache_min: int = 1024
    cache_step: int = 1
    source: str = ""
    #: the date the prices were read at the source
    retrieved: str = ""
    #: the provider's own tokenizer (an encoding name of :mod:`~execengine.bench.tokens`,
    #: or a name such as ``claude`` for one that is not available offline)
    tokenizer: str = ""
    #: tokens of the system prompt the provider adds to a request that offers tools
    tool_system_tokens: int = 0
    tool_system_source: str = ""
    #: default hidden reasoning tokens per model call (0: not a reasoning model)
    reasoning_tokens: int = 0
    reasoning_source: str = ""

    def cached(self, shared: int) -> int:
        """Tokens of a shared prefix of ``shared`` tokens the provider reads from its cache."""
        if shared < self.cache_min:
            return 0
        step = max(1, self.cache_step)
        return self.cache_min + (shared - self.cache_min) // step * step


@dataclass(frozen=True)
class Prices:
    as_of: str
    default: str
    sheets: Mapping[str, PriceSheet]
    path: str = ""

    def sheet(self, name: str | None = None) -> PriceSheet:
        key = name or self.default
        try:
            return self.sheets[key]
        except KeyError:
            raise BenchError(f"no price sheet {key!r} in {self.path or 'prices.yaml'}; "
                             f"choose one of {', '.join(sorted(self.sheets))}") from None


def load_prices(path: str | Path | None = None) -> Prices:
    """The price sheets of ``path`` (default: the ``prices.yaml`` shipped with the package)."""
    where = str(path) if path else "execengine/bench/prices.yaml"
    try:
        text = (Path(path).read_text(encoding="utf-8") if path else
                resources.files("execengine.bench").joinpath("prices.yaml")
                .read_text(encoding="utf-8"))
        doc = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read prices from {where}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("sheets"), dict) or not doc["sheets"]:
        raise BenchError(f"{where}: expected 'as_of', 'default' and a 'sheets' mapping")
    as_of = str(doc.get("as_of", ""))
    sheets = {name: _sheet(name, raw, where, as_of) for name, raw in doc["sheets"].items()}
    default = str(doc.get("default") or next(iter(sheets)))
    if default not in sheets:
        raise BenchError(f"{where}: default {default!r} is not one of the sheets")
    return Prices(as_of, default, sheets, where)


def _sheet(name: str, raw: Any, where: str, as_of: str) -> PriceSheet:
    if not isinstance(raw, dict):
        raise BenchError(f"{where}: sheet {name!r} must be a mapping")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise BenchError(f"{where}: sheet {name!r}: unknown key(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(_KEYS))}")
    try:
        return PriceSheet(
            name=str(name), provider=str(raw.get("provider", "")),
            input=float(raw["input"]), cached_input=float(raw["cached_input"]),
            output=float(raw["output"]),
            cache_write=None if raw.get("cache_write") is None else float(raw["cache_write"]),
            cache_min=int(raw.get("cache_min", 1024)), cache_step=int(raw.get("cache_step", 1)),
            source=str(raw.get("source", "")), retrieved=str(raw.get("retrieved") or as_of),
            tokenizer=str(raw.get("tokenizer", "")),
            tool_system_tokens=int(raw.get("tool_system_tokens", 0)),
            tool_system_source=str(raw.get("tool_system_source", "")),
            reasoning_tokens=int(raw.get("reasoning_tokens", 0)),
            reasoning_source=str(raw.get("reasoning_source", "")))
    except KeyError as exc:
        raise BenchError(f"{where}: sheet {name!r} lacks {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise BenchError(f"{where}: sheet {name!r}: {exc}") from None


@dataclass(frozen=True)
class Bill:
    """Tokens by how they are billed, and the dollars."""

    uncached: int = 0
    cached: int = 0
    written: int = 0
    output: int = 0
    dollars: float = 0.0

    def __add__(self, other: Bill) -> Bill:
        return Bill(self.uncached + other.uncached, self.cached + other.cached,
                    self.written + other.written, self.output + other.output,
                    self.dollars + other.dollars)

    def as_dict(self) -> dict[str, Any]:
        return {"uncached_input": self.uncached, "cached_input": self.cached,
                "cache_writes": self.written, "output": self.output,
                "dollars": round(self.dollars, 6)}


def bill(requests: Sequence[Sequence[int]], sheet: PriceSheet, *, prefix_tokens: int = 0,
         cache: str = "warm", reasoning: int = 0) -> Bill:
    """The bill of one session's requests ((prompt, output) tokens each, in order), with
    ``reasoning`` hidden output tokens per request and the sheet's tool system prompt."""
    if cache not in CACHE_MODES:
        raise BenchError(f"unknown cache mode {cache!r}; choose one of {', '.join(CACHE_MODES)}")
    if reasoning < 0:
        raise BenchError(f"reasoning tokens per call must be >= 0, not {reasoning}")
    total = Bill()
    extra = sheet.tool_system_tokens
    previous = prefix_tokens + extra if cache == "warm" else 0
    for prompt, output in ((p + extra, o + reasoning) for p, o in requests):
        cached = 0 if cache == "off" else sheet.cached(min(previous, prompt))
        fresh = prompt - cached
        written = fresh if cache != "off" and sheet.cache_write is not None \
            and prompt >= sheet.cache_min else 0
        dollars = (cached * sheet.cached_input + (fresh - written) * sheet.input
                   + written * (sheet.cache_write or 0.0) + output * sheet.output) / 1e6
        total += Bill(fresh - written, cached, written, output, dollars)
        previous = prompt
    return total
