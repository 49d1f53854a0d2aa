"""Bookie links made of network namespaces (`--links netns`): the other way to partition a bookie,
besides its proxy (`proxy.py`).

Each bookie runs in a network namespace of its own, with two veth links:

- `eth0`, its data link, on a bridge in a hub namespace: the data network 10.N.0.0/24. The
  campaign's own namespace, where the brokers, the compactor, auto-recovery, the load and
  PostgreSQL run, joins the bridge at 10.N.0.254; bookie i is 10.N.0.(10 + i), and that address
  and its port are its id;
- `eth1`, its management link, a pair of its own to the campaign's namespace (10.N.(1 + i).2 to
  .1): it reaches PostgreSQL over it (through a forwarder the campaign runs on .1), so its
  registration and heartbeats do not depend on the data link.

A fault on a bookie's `NetnsLink` uses nothing but iproute2 (`ip`, `ss`): this machine has
neither `tc netem` nor tc classifiers, nor iptables.

- `cut` (partition-bookie): its data link down. No client reaches it and it reaches none, while
  it still heartbeats over its management link. On heal, what was sent meanwhile arrives late,
  by TCP's retransmissions (as through the proxy).
- `one_way` (one-way-bookie): a blackhole route in its namespace to the clients' address. Its
  clients' requests arrive and are applied; its replies are dropped by its own kernel. On heal,
  the connections to clients are destroyed first (`ss -K`), so the held replies are lost, as
  the proxy drops them, and clients reconnect.
- `hold` (replies delivered late) is not offered: routes drop, they do not delay, and the
  campaign holds no bookie's replies (hold-store is a broker's PostgreSQL link, a proxy).

The broker's PostgreSQL links (partition-store, hold-store, one-way-store) stay proxies: a
held reply needs a proxy, and a broker in a namespace of its own would need its Kafka and HTTP
listeners reachable there too, for no fault that the proxy cannot make.

Everything is made under a tag of the campaign's own and removed by `close` (namespaces, and
with them their veths). Root only; `unavailable()` says why not.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass

CLIENTS_HOST = 254
FIRST_BOOKIE_HOST = 10
CUT, ONE_WAY, OPEN = "cut", "one_way", "open"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("ss") is None:
        return "iproute2 (ip, ss) is not installed"
    probe = f"qchaos-probe-{os.getpid()}"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"ip netns add refused: {done.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_net() -> int:
    """A second octet N such that no address of this namespace is in 10.N.0.0/16."""
    used = _ip("-4", "-o", "addr").stdout
    for n in range(200, 250):
        net = ipaddress.ip_network(f"10.{n}.0.0/16")
        if not any(ipaddress.ip_address(w.split("/")[0]) in net for w in used.split() if w.count(".") == 3):
            return n
    raise RuntimeError("no free 10.N.0.0/16 for the campaign's namespaces")


@dataclass
class NetnsLink:
    """One bookie's namespace and links; `cut`, `one_way` and `heal` as a `Proxy` has them."""

    name: str
    index: int
    namespace: str
    host: str  # its data address: what it listens on and advertises
    port: int
    clients: str  # the campaign namespace's address on the data network
    store_host: str  # the campaign's end of its management link (its PostgreSQL forwarder)
    state: str = OPEN

    @property
    def address(self) -> str:
        """The bookie's id: its address on the data network and its port."""
        return f"{self.host}:{self.port}"

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def cut(self) -> None:
        _ip("-n", self.namespace, "link", "set", "eth0", "down")
        self.state = CUT

    def one_way(self) -> None:
        _ip("-n", self.namespace, "route", "add", "blackhole", f"{self.clients}/32")
        self.state = ONE_WAY

    def hold(self) -> None:
        raise NotImplementedError("a namespace link drops, it cannot hold replies: use a proxy")

    def heal(self) -> None:
        was, self.state = self.state, OPEN
        if was == CUT:
            _ip("-n", self.namespace, "link", "set", "eth0", "up")
        elif was == ONE_WAY:
            subprocess.run(
                [*self.exec_prefix(), "ss", "-K", "dst", self.clients],
                capture_output=True, timeout=30, check=False,
            )  # fmt: skip
            _ip("-n", self.namespace, "route", "del", "blackhole", f"{self.clients}/32")


class Netns:
    """The hub, the campaign namespace's place on it, and one `NetnsLink` per bookie."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.net = _free_net()
        self.hub = f"qchaos-{tag}-hub"
        self.clients = f"10.{self.net}.0.{CLIENTS_HOST}"
        self.namespaces: list[str] = []
        self.veths: list[str] = []  # ends in the campaign's namespace (gone with their peers)

    def _veth_name(self, what: str) -> str:
        return f"qc{self.tag[:6]}{what}"[:15]  # an interface name has at most 15 characters

    def start(self) -> None:
        _ip("netns", "add", self.hub)
        self.namespaces.append(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        root_end = self._veth_name("c")
        _ip("link", "add", root_end, "type", "veth", "peer", "name", "up0", "netns", self.hub)
        self.veths.append(root_end)
        _ip("-n", self.hub, "link", "set", "up0", "master", "br0", "up")
        _ip("addr", "add", f"{self.clients}/24", "dev", root_end)
        _ip("link", "set", root_end, "up")

    def plan(self, name: str, index: int, port: int) -> NetnsLink:
        """Bookie `index`'s link, its addresses chosen; `make` creates it."""
        if not 0 <= index < CLIENTS_HOST - FIRST_BOOKIE_HOST:
            raise ValueError(f"bookie index {index} out of range")
        return NetnsLink(
            name, index, f"qchaos-{self.tag}-{name}", f"10.{self.net}.0.{FIRST_BOOKIE_HOST + index}",
            port, self.clients, f"10.{self.net}.{1 + index}.1",
        )  # fmt: skip

    def make(self, link: NetnsLink) -> None:
        """The bookie's namespace, on the data network and with its management link."""
        ns, index, host, store_host = link.namespace, link.index, link.host, link.store_host
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        port = f"p{index}"
        _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.hub)
        _ip("-n", self.hub, "link", "set", port, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{host}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        mgmt = self._veth_name(f"m{index}")
        _ip("link", "add", mgmt, "type", "veth", "peer", "name", "eth1", "netns", ns)
        self.veths.append(mgmt)
        _ip("addr", "add", f"{store_host}/30", "dev", mgmt)
        _ip("link", "set", mgmt, "up")
        _ip("-n", ns, "addr", "add", f"10.{self.net}.{1 + index}.2/30", "dev", "eth1")
        _ip("-n", ns, "link", "set", "eth1", "up")

    def remove(self, link: NetnsLink) -> None:
        """A bookie gone for good: its namespace (and its veths) deleted."""
        _ip("netns", "del", link.namespace, check=False)
        with contextlib.suppress(ValueError):
            self.namespaces.remove(link.namespace)

    def close(self) -> None:
        for ns in reversed(self.namespaces):
            _ip("netns", "del", ns, check=False)
        self.namespaces.clear()
        for veth in self.veths:  # normally gone with their peers' namespaces
            _ip("link", "del", veth, check=False)
        self.veths.clear()
