"""Host side of the execute_code RPC (protocol in ``docs/protocol.md``).

:mod:`.channel` is one execution's end (secret, allowed tools, budget), :mod:`.server` is
the epoll loop serving all of them, :mod:`.connection` one peer with its reply queue, the
ZMTP codec and the protocol's messages (parsed and built without a socket),
:mod:`.pool` the bounded worker pool that runs tool calls, :mod:`.memory` the in-memory
twin of the server (the transport seam's fake).
"""

from execengine.rpc.channel import Channel, limit_message, unavailable_message
from execengine.rpc.server import RpcServer

__all__ = ["Channel", "RpcServer", "limit_message", "unavailable_message"]
