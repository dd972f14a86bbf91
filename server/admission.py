"""Admission (sans-I/O): who may hold a socket, counted per address, as nginx's limit_conn.

Every TCP connection holds a ``Ticket`` from the moment it is accepted until it closes,
on every path: first as a handshake in progress (capped per address: half-open
connections sent by the thousand cannot pile up for the handshake timeout), then, only
once its websocket handshake is accepted, as an open connection (capped per address and
in total). A plain HTTP request, a bad handshake or a refused one never becomes open
and gives its ticket back when its socket closes. A socket over its address's handshake
cap is not refused before its request is read while few such are held in all (each for
a short time): it may be a health check, answered 200 whatever its address does, and is
answered 503 otherwise. All sockets together stay under a budget drawn from the
process's file-descriptor limit, so that the server refuses a connection with an answer
instead of running out of descriptors.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import resource
from collections import Counter
from dataclasses import dataclass

# IPv6: one subscriber gets a whole /64 (RFC 6177), so its addresses count as one.
IPV6_PREFIX = 64


def address_key(host: str | None) -> str:
    """The key an address is counted under: an IPv4 address (IPv4-mapped IPv6 included),
    the /64 prefix of an IPv6 address, or the text itself if it is neither."""
    if not host:
        return "?"
    ip = _ip(host)
    if ip is None:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False))
    return str(ip)


class Proxies:
    """The reverse proxies (nginx, HAProxy) trusted to name the client they forward, in
    ``X-Forwarded-For``. Behind one, every connection comes from the proxy's address;
    the per-address caps count the address the proxy names instead. The client is the
    rightmost address of the chain not itself a trusted proxy (each proxy appends the
    address it received from, so everything left of that may be the client's own
    invention); a connection from any other address is taken at its word, its header
    ignored."""

    def __init__(self, networks: tuple[str, ...] = ()) -> None:
        """ValueError, naming it, for an entry that is no address or network."""
        parsed = []
        for network in networks:
            try:
                parsed.append(ipaddress.ip_network(network.strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"trusted proxy {network!r} is not an address or a network (CIDR)"
                ) from None
        self.networks = tuple(parsed)

    def trusts(self, host: str | None) -> bool:
        ip = _ip(host)
        return ip is not None and any(ip in network for network in self.networks)

    def client(self, peer: str | None, forwarded_for: list[str]) -> str | None:
        """The client's address: ``peer`` unless it is a trusted proxy naming another."""
        if not self.trusts(peer):
            return peer
        chain = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(chain):
            if _ip(hop) is None:
                return peer  # a garbled chain names no one: count the proxy
            if not self.trusts(hop):
                return hop
        return peer


def _ip(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not host:
        return None
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


class Stage(enum.Enum):
    HANDSHAKE = "handshake"  # accepted by TCP, websocket handshake in progress
    HEALTH_ONLY = "health only"  # over its address's handshake cap: a health check or 503
    OPEN = "open"  # websocket handshake accepted
    GONE = "gone"  # socket closed; the ticket holds nothing


@dataclass(slots=True, eq=False)
class Ticket:
    """One socket's place: its address key and its stage (``refused``: why a HEALTH_ONLY
    socket is answered 503 unless it asks for the health check)."""

    address: str
    stage: Stage = Stage.HANDSHAKE
    refused: str = ""


class Refused(Exception):
    """Over a cap: ``reason`` names it (sent to the client after ``too_many:``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Admission:
    """Counts of sockets per address and in total, against the caps."""

    def __init__(
        self,
        *,
        max_open: int,
        max_open_per_address: int,
        max_handshakes_per_address: int,
        max_sockets: int,
        max_health_only: int = 0,
        proxies: Proxies | None = None,
    ) -> None:
        self.proxies = proxies or Proxies()
        self.max_health_only = max_health_only
        self.health_only = 0
        self.max_open = max_open
        self.max_open_per_address = max_open_per_address
        self.max_handshakes_per_address = max_handshakes_per_address
        self.max_sockets = max_sockets
        self.handshakes: Counter[str] = Counter()
        self.open: Counter[str] = Counter()
        self.open_total = 0
        self.sockets = 0

    def arrive(self, host: str | None) -> Ticket:
        """A socket was accepted: its handshake starts; over its address's handshake cap, it
        is HEALTH_ONLY while fewer than ``max_health_only`` are. Raises Refused over a cap."""
        address = address_key(host)
        if self.sockets >= self.max_sockets:
            raise Refused(
                f"the server is at its limit of {self.max_sockets} sockets (file descriptors)"
            )
        trusted = self.proxies.trusts(host)  # a proxy: its clients are counted at the handshake
        if self.handshakes[address] >= self.max_handshakes_per_address and not trusted:
            reason = f"at most {self.max_handshakes_per_address} handshakes in progress per address"
            if self.health_only >= self.max_health_only:
                raise Refused(reason)
            self.health_only += 1
            self.sockets += 1
            return Ticket(address, Stage.HEALTH_ONLY, reason)
        self.handshakes[address] += 1
        self.sockets += 1
        return Ticket(address)

    def open_websocket(self, ticket: Ticket, client: str | None = None) -> None:
        """The socket's websocket handshake is accepted: it takes an open slot, counted
        under ``client`` (the address a trusted proxy named) if given. Raises Refused over
        a cap (the ticket stays a handshake, to be given back on close)."""
        if ticket.stage is Stage.HEALTH_ONLY:
            raise Refused(ticket.refused)
        if ticket.stage is not Stage.HANDSHAKE:
            raise Refused("the connection closed during its handshake")
        address = ticket.address if client is None else address_key(client)
        if self.open_total >= self.max_open:
            raise Refused(f"the server holds at most {self.max_open} connections")
        if self.open[address] >= self.max_open_per_address:
            raise Refused(f"at most {self.max_open_per_address} connections per address")
        self._drop(self.handshakes, ticket.address)
        ticket.address = address
        self.open[address] += 1
        self.open_total += 1
        ticket.stage = Stage.OPEN

    def leave(self, ticket: Ticket) -> None:
        """The socket closed: give back whatever it held (idempotent)."""
        if ticket.stage is Stage.HANDSHAKE:
            self._drop(self.handshakes, ticket.address)
        elif ticket.stage is Stage.HEALTH_ONLY:
            self.health_only -= 1
        elif ticket.stage is Stage.OPEN:
            self._drop(self.open, ticket.address)
            self.open_total -= 1
        else:
            return
        self.sockets -= 1
        ticket.stage = Stage.GONE

    @staticmethod
    def _drop(counts: Counter[str], address: str) -> None:
        left = counts[address] - 1
        if left > 0:
            counts[address] = left
        else:
            del counts[address]


# --- file descriptors ---------------------------------------------------------------------


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (what nginx's
    worker_rlimit_nofile and systemd's LimitNOFILE intend); returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft, hard


def open_file_count() -> int:
    """File descriptors this process holds now."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(directory))
        except OSError:
            continue
    return 0


def socket_budget(reserve: int) -> int:
    """Sockets the server may hold: the soft descriptor limit, less what is open now (the
    database, the engine workers' pipes, the logs) and ``reserve`` (at most a quarter of
    the limit) kept free for what opens later and for a burst of accepts before they are
    refused."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(1, soft - open_file_count() - min(reserve, soft // 4))
