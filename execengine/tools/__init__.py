"""Built-in tools. Each tool module holds a ``ToolSpecs`` and calls ``register`` at top level;
:mod:`execengine.discovery` finds them by that, without importing helper modules."""
