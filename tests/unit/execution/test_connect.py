"""The embedded Ray's dashboard port: free, and out of the kernel's range for outgoing connections."""

import socket

import pytest

from tune_service.execution.connect import LISTENING_PORTS_START, free_listening_port, _outgoing_ports_start


def test_the_dashboard_port_is_free_and_no_outgoing_connection_can_take_it():
    for _ in range(20):
        port = free_listening_port()
        assert LISTENING_PORTS_START <= port < _outgoing_ports_start()
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_never_chosen():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_listening_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="no free loopback port"):
            free_listening_port(range(busy, busy + 1))
    assert free_listening_port(range(busy, busy + 1)) == busy  # free again once its listener is gone
