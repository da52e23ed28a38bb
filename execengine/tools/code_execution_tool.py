"""The ``execute_code`` tool (toolset ``code_execution``): run a Python script that calls
tools programmatically. Its behaviour is :mod:`execengine.engine.tool`'s; this module
registers it (unbound until an :class:`~execengine.Engine` is built on the registry)."""

from __future__ import annotations

from execengine.discovery import ToolSpecs
from execengine.engine.tool import SCHEMA, patch_schema, refused, unbound

specs = ToolSpecs()

specs.register("execute_code", "code_execution", SCHEMA, unbound,
               schema_patch=patch_schema, emoji="🐍", refusal=refused)
