"""Drop-in integrations: execengine's ``execute_code`` for the agent frameworks people use.

One module per framework, each behind its own extra, each importing its framework only when
it is imported itself (``import execengine`` and this package import none):

- ``hermes``: a Hermes Agent plugin (``[hermes]``) whose ``execute_code`` runs here;
- ``openai_agents``: ``execute_code_tool(tools)``, a FunctionTool (``[openai-agents]``);
- ``langchain``: ``ExecuteCodeTool(tools=tools)``, a BaseTool (``[langchain]``);
- ``smolagents``: ``ExecengineExecutor``, a CodeAgent executor (``[smolagents]``);
- ``pydantic_ai``: ``execengine_toolset(tools)``, a toolset (``[pydantic-ai]``).

``core`` is what they share: a :class:`~execengine.integrations.core.ToolBridge` turns a
framework's tools (name, description, JSON schema, a sync or async callable) into a
registry and an engine, and runs scripts that call them.
"""
