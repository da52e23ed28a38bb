"""Remote execution: scripts and their child runtime on another machine, over SSH.

:mod:`.ssh` holds the connection (system OpenSSH, multiplexed, host keys always checked);
:mod:`.launcher` runs an execution's child there with its tool calls forwarded back.
"""
