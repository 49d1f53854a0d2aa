"""Who may receive from a subscription: its live consumers and, for exclusive and failover, the
one that receives (Pulsar's dispatchers keep the same: the consumer list and the active one).

A consumer is live while it asks for messages (a long poll counts until it ends) and leaves once
silent for the consumer idle time, or at once when it says it is gone (a Pulsar consumer
closing). Exclusive serves one consumer: another is refused while the first is live. Failover's
active consumer is the first by sorted id among the live ones. What a change means for the
messages a consumer held (redelivery, key_shared's keys) is the dispatcher's to do
(`topics.dispatchers`); this class only says who joined, who left and who is active.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Change:
    """What a consumer's request changed: consumers that left, whether one joined, and the new
    active consumer (failover) when it changed."""

    gone: list[str]
    joined: bool
    new_active: str | None = None


class Members:
    def __init__(self, idle_ms: int) -> None:
        self.idle_ms = idle_ms
        self.owner: str | None = None  # exclusive: the consumer; failover: the active one
        self._owner_seen_ms = 0
        self.live: dict[str, int] = {}  # failover, key_shared: live consumer -> heard until (ms)

    def heard(self, consumer: str | None, until_ms: int) -> None:
        """A consumer is waiting in a long poll until `until_ms`: it stays live that long."""
        if consumer in self.live:
            self.live[consumer] = max(self.live[consumer], until_ms)

    def left(self, consumer: str) -> None:
        """`consumer` says it is gone: as if silent past the idle time, so the next request
        sees it leave."""
        if consumer in self.live:
            self.live[consumer] = -self.idle_ms - 1

    def join(self, consumer: str, now: int, failover: bool) -> Change:
        """Note `consumer` as live; consumers silent for the idle time leave. With `failover`,
        the active consumer follows the live set."""
        joined = consumer not in self.live
        self.live[consumer] = max(self.live.get(consumer, 0), now)
        gone = [c for c, heard in self.live.items() if now - heard > self.idle_ms]
        for c in gone:
            del self.live[c]
        if failover:
            active = min(self.live)
            if active != self.owner:
                self.owner = active
                return Change(gone, joined, active)
        return Change(gone, joined)

    def claim(self, consumer: str, now: int) -> bool:
        """Exclusive: `consumer` receives; True when it takes over from a previous consumer gone
        silent. None other may while the owner is live (the caller refuses it: False is never
        returned for a busy subscription, `busy` says so first)."""
        previous = self.owner
        self.owner = consumer
        self._owner_seen_ms = now
        return previous is not None and previous != consumer

    def busy(self, consumer: str, now: int) -> str | None:
        """Exclusive: the live owner that is not `consumer`, or None."""
        owner = self.owner
        if owner is not None and owner != consumer and now - self._owner_seen_ms <= self.idle_ms:
            return owner
        return None

    def next_leave_ms(self) -> list[int]:
        """When each live consumer leaves unless heard from again (ms, on the subscription's
        clock)."""
        return [heard + self.idle_ms + 1 for heard in self.live.values()]
