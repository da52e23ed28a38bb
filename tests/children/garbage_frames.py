"""Connects to the RPC socket and misbehaves: raw junk on the socket, then a ZMTP peer
sending garbage frames, a wrong token, and a correct hello followed by junk. Prints what it
saw as JSON lines. Uses pyzmq (available in the host's interpreter) for the valid peers."""
import json
import os
import socket
import time

import zmq
from _common import say_ready

say_ready()

path = os.environ["EXECENGINE_RPC_ENDPOINT"]
token = os.environ["EXECENGINE_RPC_TOKEN"]
exec_id = os.environ["EXECENGINE_EXEC_ID"]

raw = socket.socket(socket.AF_UNIX)
raw.connect(path)
raw.sendall(os.urandom(4096))
raw.close()

ctx = zmq.Context()


def peer():
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect("ipc://" + path)
    return s


def ask(s, payload, wait=2000):
    s.send(payload)
    if s.poll(wait):
        return json.loads(s.recv())
    return None


bad = peer()
print(json.dumps({"wrong_token": ask(bad, json.dumps(
    {"v": 1, "type": "hello", "exec": exec_id, "token": "0" * 64}).encode())}), flush=True)
good = peer()
print(json.dumps({"hello": ask(good, json.dumps(
    {"v": 1, "type": "hello", "exec": exec_id, "token": token, "pid": os.getpid()}).encode())}),
    flush=True)
for junk in (b"\xff\x00", b"null", b'{"v":1}', b'{"v":1,"type":"call","id":"q","tool":7}'):
    print(json.dumps({"junk": ask(good, junk)}), flush=True)
good.send_multipart([b"two", b"frames"])
print(json.dumps({"multi": json.loads(good.recv()) if good.poll(2000) else None}), flush=True)
print(json.dumps({"call": ask(good, json.dumps(
    {"v": 1, "type": "call", "id": "z", "tool": "echo", "args": {"n": 1}}).encode())}),
    flush=True)
bad.close()
good.close()
ctx.term()
time.sleep(0.01)
