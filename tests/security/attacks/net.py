"""TCP connect, UDP sendto and an abstract Unix socket connect to listeners the host owns."""

import json
import socket
import sys

args = json.loads(sys.argv[1])
res = {}
try:
    s = socket.create_connection(("127.0.0.1", args["tcp"]), timeout=2)
    s.sendall(b"tcp-leak")
    s.close()
    res["tcp"] = "connected"
except OSError as e:
    res["tcp"] = f"{type(e).__name__}: {e}"
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(args["marker"].encode(), ("127.0.0.1", args["udp"]))
    u.close()
    res["udp"] = "sent"
except OSError as e:
    res["udp"] = f"{type(e).__name__}: {e}"
try:
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(2)
    a.connect("\0" + args["abstract"])
    a.sendall(b"abstract-leak")
    a.close()
    res["abstract"] = "connected"
except OSError as e:
    res["abstract"] = f"{type(e).__name__}: {e}"
print(json.dumps(res))
