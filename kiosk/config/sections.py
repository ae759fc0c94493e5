"""What the config's sections share: the frozen, strict base model and the network fields'
parsing (an ``address:port`` to listen on, a list of allowed networks), used by the keepsake
server's section and the staff console's."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: frozen, and an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def host_port(v: str, example_port: int = 8088) -> tuple[str, int]:
    """``"0.0.0.0:8088"`` / ``"[::]:8088"`` → (host, port); ValueError with the fix otherwise."""
    p = example_port
    host, sep, port = v.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") if host.startswith("[") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"must be address:port, e.g. 0.0.0.0:{p} (all interfaces) or 192.168.1.10:{p}")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{host} is not an IP address; use e.g. 0.0.0.0:{p} or 192.168.1.10:{p}") from None
    return host, int(port)


def default_allow() -> list[str]:
    """The private networks (RFC 1918 and IPv6 ULA): a booth LAN is one of them."""
    return ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"]


def networks(v: list[str], who: str) -> list[str]:
    """``v`` as normalised CIDR networks; ValueError with the fix for a bad or empty list (``who``:
    whose requests the list admits, for the message)."""
    out = []
    for item in v:
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ValueError(
                f"{item} is not a network; use CIDR such as 192.168.1.0/24 or 10.0.0.0/8"
            ) from None
    if not out:
        raise ValueError(f"is empty: no {who}; name the booth LAN, e.g. 192.168.1.0/24")
    return out
