"""Where a process group's ranks meet: gloo pointed at the interface of the node's address."""

from __future__ import annotations

import psutil

from tune_service.programs.rendezvous import gloo_interface


def test_gloo_is_pointed_at_the_interface_that_holds_the_nodes_address(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    loopback = next(name for name, addresses in psutil.net_if_addrs().items()
                    if any(a.address == "127.0.0.1" for a in addresses))
    assert gloo_interface("127.0.0.1") == {"GLOO_SOCKET_IFNAME": loopback}
    assert gloo_interface("192.0.2.1") == {}  # TEST-NET-1: no interface holds it; gloo chooses as it would


def test_an_interface_the_user_named_for_gloo_is_kept(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    assert gloo_interface("127.0.0.1") == {}
