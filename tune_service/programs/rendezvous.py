"""Where the ranks of a process group meet: rank 0's ``torch.distributed`` store, listening on this node's
address only.

torch's own store (rank 0's, for ``init_method="tcp://..."`` and ``env://``) listens on every interface
(``::``), whatever address the ranks are given: any host that reaches the machine could then connect to a
trial's process group. Here rank 0 binds the port itself, on the address the other ranks are told, and
hands the bound socket to the store (``master_listen_fd``). That also ends the race of a port probed free
and bound later. gloo's own sockets bind the address the host's name resolves to, which may be another
interface's than Ray's: :func:`gloo_interface` names the interface of the node's address.
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.distributed import TCPStore

#: Set in a program rank's environment: torch's rendezvous then makes every rank a client of the store
#: that rank 0's actor hosts, as under ``torchrun`` (whose agent hosts it).
AGENT_STORE_ENVIRONMENT = {"TORCHELASTIC_USE_AGENT_STORE": "True"}


def listen() -> socket.socket:
    """A socket listening on this node's address (the one Ray knows it by) on a free port."""
    import ray

    address = ray.util.get_node_ip_address()
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return socket.create_server((address, 0), family=family, backlog=128)


def address_of(listener: socket.socket) -> tuple[str, int]:
    """The host and port ``listener`` is bound to (an IPv6 socket's name also carries flow and scope)."""
    host, port = listener.getsockname()[:2]
    return host, port


def gloo_interface(address: str) -> dict[str, str]:
    """``GLOO_SOCKET_IFNAME`` naming the network interface that holds ``address`` (this node's, as Ray
    knows it), for a rank's environment; nothing where the environment names one already (the user's
    choice) or no interface holds the address."""
    import psutil

    if "GLOO_SOCKET_IFNAME" in os.environ:
        return {}
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == address for a in addresses):
            return {"GLOO_SOCKET_IFNAME": name}
    return {}


def serve(listener: socket.socket, timeout: datetime.timedelta, world_size: int | None = None) -> "TCPStore":
    """The store's server on ``listener`` (which it takes over and closes). With ``world_size`` it waits,
    up to ``timeout``, for that many members (itself included); without, it returns at once."""
    from torch.distributed import TCPStore

    host, port = address_of(listener)
    return TCPStore(
        host,
        port,
        world_size,
        is_master=True,
        timeout=timeout,
        wait_for_workers=world_size is not None,
        master_listen_fd=listener.detach(),
    )


def connect(address: str, port: int, world_size: int, timeout: datetime.timedelta) -> "TCPStore":
    """A client of the store at ``address:port``."""
    from torch.distributed import TCPStore

    return TCPStore(address, port, world_size, is_master=False, timeout=timeout)
