"""Which open topics each periodic check must look at: dirty sets, so that a check's cost follows
activity, not the number of open topics.

A topic is marked for every check when it is opened here, when its policies are applied, when
it is produced to, and when its backlog moves (an ack, a seek, an expiry, an eviction: the
backlog quota's `changed`); the stats mark it when it is read or delivered from. A check takes
its set (`take`: the marked names, sorted, and the set emptied) and visits those still open;
it `keep`s a topic it must see again without a new mark: one with a deadline (a TTL topic with a
backlog, a message-age quota, a compaction run requested or running, a maxLagMs to wait for) or
figures still moving (rates that must decay to zero, clients that must age out).
"""

from __future__ import annotations

from typing import Literal

Check = Literal["ttl", "quota", "compaction", "stats"]
CHECKS: tuple[Check, ...] = ("ttl", "quota", "compaction", "stats")


class Activity:
    """The dirty set of each periodic check (topic names)."""

    __slots__ = ("_sets", "visits")

    def __init__(self) -> None:
        self._sets: dict[Check, set[str]] = {check: set() for check in CHECKS}
        self.visits: dict[Check, int] = dict.fromkeys(CHECKS, 0)  # topics taken so far (tests)

    def touched(self, name: str) -> None:
        """Something changed on the topic: every check looks at it next time."""
        for marked in self._sets.values():
            marked.add(name)

    def keep(self, check: Check, name: str) -> None:
        """The check looks at the topic next time too."""
        self._sets[check].add(name)

    def take(self, check: Check) -> list[str]:
        marked = self._sets[check]
        out = sorted(marked)
        marked.clear()
        self.visits[check] += len(out)
        return out

    def pending(self, check: Check) -> int:
        return len(self._sets[check])
