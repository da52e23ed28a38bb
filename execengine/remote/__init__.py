"""Remote execution: scripts, commands and file operations on another machine, over SSH.

:mod:`.ssh` holds the connection (system OpenSSH, multiplexed, host keys always checked)
and :mod:`.mux` talks to its master directly (the host of ``terminal.backend: ssh`` built on
them is :class:`execengine.host.ssh.SshHost`); :mod:`.launcher` runs an
execution's child there with its tool calls forwarded back; :mod:`.files` runs the file
tools' operations there; :mod:`.terminal` is its terminal backend; :mod:`.doctor` checks a
configured remote.
"""
