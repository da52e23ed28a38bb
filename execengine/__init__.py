"""execengine: a sandboxed code-execution engine for programmatic tool calling.

Where things live:

- ``config`` (+ ``_configload``): the typed configuration and the YAML loader.
- ``registry``, ``toolsets``, ``schema``, ``discovery``, ``dispatch``: the tool runtime.
- ``tools/``: built-in tools (one module per tool family, found by an AST scan).
- ``childenv``, ``workdirs``, ``context``: what tools and children are given.
- ``launch/``: how a child is started and killed (the isolation seam).
- ``cli/``: the ``execengine`` command.

The child-side runtime is the top-level ``sandbox/`` folder and the Jinja templates are in
``stubs/``; both ship inside the wheel (see ``_resources``).
"""

from execengine.config import Config, load_config
from execengine.context import ToolContext
from execengine.dispatch import Refuse
from execengine.errors import (
    ConfigError,
    ExecEngineError,
    HandshakeError,
    IsolationError,
    PluginError,
    SandboxError,
    SchemaError,
    ToolConflictError,
    ToolError,
    TransportError,
    UnknownToolError,
    UnknownToolsetError,
)
from execengine.registry import Availability, ToolEntry, ToolRegistry, ToolSpecs
from execengine.toolsets import Toolset

__version__ = "0.1.0"

__all__ = [
    "Availability",
    "Config",
    "ConfigError",
    "ExecEngineError",
    "HandshakeError",
    "IsolationError",
    "PluginError",
    "Refuse",
    "SandboxError",
    "SchemaError",
    "ToolConflictError",
    "ToolContext",
    "ToolEntry",
    "ToolError",
    "ToolRegistry",
    "ToolSpecs",
    "Toolset",
    "TransportError",
    "UnknownToolError",
    "UnknownToolsetError",
    "__version__",
    "load_config",
]
