"""Unix sockets: one execution cannot reach another's RPC socket; host pathname sockets
are out of reach at ``isolated`` (at ``restricted`` they are not: see the README)."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from execengine.config import Config
from execengine.engine.core import Engine

from .conftest import level_params, wait_until

LEVEL = level_params()

HOLD = """
import os, time
open("endpoint", "w").write(os.environ["EXECENGINE_RPC_ENDPOINT"])
deadline = time.time() + 20
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.02)
print("released")
"""

PROBE = """
import json, socket
res = {{}}
for name, path in (("other_rpc", {other!r}), ("host_socket", {host!r})):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        res[name] = "connected"
    except OSError as e:
        res[name] = type(e).__name__
    finally:
        s.close()
print(json.dumps(res))
"""


@pytest.fixture
def host_socket(tmp_path):
    folder = tmp_path / "sockdir"
    folder.mkdir()
    folder.chmod(0o777)
    path = str(folder / "s")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(8)
    yield path
    server.close()


@pytest.mark.parametrize("level", LEVEL)
def test_another_executions_socket_is_unreachable(level, tmp_path, host_socket):
    import json

    config = Config().with_overrides({"code_execution.isolation": level,
                                      "code_execution.min_isolation": level})
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with Engine(config) as engine:
        held: dict[str, object] = {}
        thread = threading.Thread(target=lambda: held.update(
            r=engine.execute(HOLD, cwd=str(a))))
        thread.start()
        try:
            assert wait_until(lambda: (a / "endpoint").exists(), 20.0)
            time.sleep(0.05)  # the file's content is written right after it appears
            other = (a / "endpoint").read_text()
            r = engine.execute(PROBE.format(other=other, host=host_socket), cwd=str(b))
        finally:
            (a / "release").write_text("")
            thread.join(30)
    assert r.status == "success", r.error
    res = json.loads(r.output.strip().splitlines()[-1])
    assert held["r"].output == "released\n"  # type: ignore[union-attr]
    if level == "none":
        assert res == {"other_rpc": "connected", "host_socket": "connected"}
        return
    assert res["other_rpc"] != "connected", res
    if level == "isolated":
        assert res["host_socket"] != "connected", res
