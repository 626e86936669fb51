"""The embedded Ray's dashboard port: free, and out of the kernel's range for outgoing connections."""

import socket

from tune_service.execution.connect import LISTENING_PORTS_START, free_listening_port, _outgoing_ports_start


def test_the_dashboard_port_is_free_and_no_outgoing_connection_can_take_it():
    for _ in range(20):
        port = free_listening_port()
        assert LISTENING_PORTS_START <= port < _outgoing_ports_start()
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_passed_over():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert {free_listening_port(range(busy, busy + 2)) for _ in range(10)} == {busy + 1}
