"""Child-side runtime of execengine (standard library only, Python >= 3.8).

It runs inside the sandboxed child, copied into the staging directory as ``_execengine``
(hence relative imports only; tests import it as ``sandbox``):

- ``bootstrap``: the entry point, ``python -m _execengine.bootstrap script.py``: subreaper,
  watchdog, eager hello, runs the script as ``__main__``.
- ``kernel``: the session kernel (``python -c "{kernel.ENTRY}"``): runs many cells in one
  persistent ``__main__`` (commands and replies on pipes from the host), interrupts a cell in
  place, kills what a cell left running, dies with the host.
- ``client``: the RPC client behind the ``hermes_tools`` functions (``call_tool``,
  ``acall_tool``, ``ToolCallError``); concurrent calls matched by request id.
- ``zmtp``: a small ZMTP 3.0/3.1 client (NULL mechanism, DEALER) over a Unix socket.
- ``helpers``: ``json_parse``, ``shell_quote``, ``retry`` for scripts.
- ``zygote``: the program of an interpreter a sandboxed warm entry starts ahead: it waits
  for the plan, finishes entering the sandbox and runs ``python -c`` code in-process (not
  imported in the child: the spawner hands its source over on a pipe).

Importing the package imports nothing else, to keep the child's start-up small.
"""
