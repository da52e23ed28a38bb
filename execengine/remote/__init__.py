"""Remote execution: scripts, commands and file operations on another machine, over SSH.

:mod:`.ssh` holds the connection (system OpenSSH, multiplexed, host keys always checked)
and :mod:`.mux` talks to its master directly; :mod:`.host` is a registry's remote (one
connection for everything); :mod:`.launcher` runs an execution's child there with its tool
calls forwarded back; :mod:`.files` runs the file tools' operations there;
:mod:`.doctor` checks a configured remote. The ``ssh`` terminal backend is
:mod:`execengine.terminal.ssh`.
"""
