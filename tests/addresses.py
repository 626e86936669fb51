"""IP addresses as sockets report them, for the tests that check where processes listen."""

from __future__ import annotations

import ipaddress


def unmapped(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """``ip`` without its zone (``fe80::1%eth0``), and an IPv4 address a dual-stack IPv6 socket was bound to
    (``::ffff:127.0.0.1``) as the IPv4 address it is."""
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address
