"""Red team: where ``execengine mcp --http`` keeps the token it makes.

The token file's folder was made private with ``chmod 0700`` whenever it was the user's
and others could enter it. Run as root with ``--token-file /tmp/mcp.token``, the server
owns ``/tmp``: it made ``/tmp`` mode 0700, locking every other user out of it and dropping
its sticky bit. Now only a folder the server makes is tightened; one that was there keeps
its mode (the token file is 0600 in any case), and one others may write without the sticky
bit (where they could swap the file) is refused.

A real server process, with a shared sticky folder (1777, root's: a ``/tmp`` of the test's
own) as the token file's folder. Controls: a folder the server makes is still made 0700,
and the token file is readable by its owner only.
"""

from __future__ import annotations

import os
import stat

import pytest

from execengine.errors import McpError
from execengine.mcp.token import write_token
from tests.mcp._mcp_helpers import cli_env, serve_http, stop

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)


def _serve(tmp_path, token_file) -> str:
    """Start a server writing its token to ``token_file``; the path it printed."""
    server = serve_http(["mcp", "--http", "127.0.0.1:0", "--token-file", str(token_file)],
                        cli_env(tmp_path))
    try:
        assert server.token_file is not None
        info = os.stat(server.token_file)
        assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
        return server.token_file
    finally:
        stop(server.proc, wait=15)


def test_a_shared_folder_keeps_its_mode(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: everyone's, sticky
    _serve(tmp_path, shared / "mcp.token")
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    # the control: a folder the server makes is private
    made = tmp_path / "made" / "here"
    _serve(tmp_path, made / "mcp.token")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700


def test_a_folder_others_may_write_is_refused(tmp_path):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)  # not sticky: anyone could swap the token file
    with pytest.raises(McpError, match="others may write"):
        write_token(open_folder / "mcp.token", "x" * 43)
    assert not (open_folder / "mcp.token").exists()
    assert stat.S_IMODE(os.stat(open_folder).st_mode) == 0o777
