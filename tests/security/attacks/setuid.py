"""Plant a set-user-ID / set-group-ID file in the working directory, every way a mode can
be given: chmod, fchmod, chmod via coreutils, and a mode at creation (open, mknod)."""

import json
import os
import shutil
import subprocess
import sys

args = json.loads(sys.argv[1])
res = {}
shutil.copy(args["binary"], "plant")


def attempt(name, fn):
    try:
        fn()
        res[name] = "done"
    except OSError as e:
        res[name] = f"{type(e).__name__}: {e}"


attempt("chmod", lambda: os.chmod("plant", 0o6755))


def via_fchmod():
    fd = os.open("plant", os.O_RDONLY)
    try:
        os.fchmod(fd, 0o4755)
    finally:
        os.close(fd)


attempt("fchmod", via_fchmod)
attempt("setgid", lambda: os.chmod("plant", 0o2755))
attempt("create", lambda: os.close(os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod", lambda: os.mknod("node", 0o100000 | 0o4755))
chmod_bin = shutil.which("chmod")
if chmod_bin:
    out = subprocess.run([chmod_bin, "u+s", "plant"], capture_output=True, text=True)
    res["coreutils"] = out.returncode
print(json.dumps(res))
