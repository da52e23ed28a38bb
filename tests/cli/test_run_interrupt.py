"""``execengine run`` and Ctrl-C: exit status 130 with the output printed so far.

Run for real in a child interpreter (the one running the tests, as CI's), where SIGINT
becomes KeyboardInterrupt in the main thread exactly as at a terminal. On Python 3.10-3.12
this printed ``KeyError: 'result'`` and exited 1, losing the output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

SCRIPT = ("import time\nprint('before', flush=True)\nopen('started', 'w').close()\n"
          "time.sleep(60)\nprint('after')")


def test_ctrl_c_exits_130_with_the_output_so_far(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "EXECENGINE_CONFIG"}
    env["HOME"] = str(tmp_path)  # no user config
    proc = subprocess.Popen(
        [sys.executable, "-m", "execengine", "run", "--isolation", "none", "--cwd",
         str(tmp_path), "-c", SCRIPT],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "KeyError" not in err and "Traceback" not in err
    assert out.startswith("before\n") and "after" not in out
    assert "[interrupted]" in err
