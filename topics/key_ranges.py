"""key_shared's hash ranges: which consumer owns which key, as Pulsar's selectors decide
(`StickyKeyConsumerSelector`), for `topics.key_shared.KeyRouter`.

A key's slot is Murmur3_32 (x86, seed 0) of its bytes, & 0x7fffffff, mod 65,536 (Pulsar's
`makeStickyKeyHash` and range size); a message without a key hashes as the bytes `NONE_KEY`.
Keys that came in as bytes (Kafka, a Pulsar ordering key) hash as those bytes (`bytes_of`).

- **AUTO_SPLIT** (the default, `KeySharedPolicy(sticky=False)`): the slots are divided by a
  consistent-hash ring of the live consumers, 100 points each (Pulsar's consistent-hashing
  selector and its default replica points): a slot goes to the first point at or after it, so a
  consumer joining or leaving moves only the keys next to its points.
- **STICKY**: each consumer declares its inclusive ranges of slots; they may not overlap another
  live consumer's (`ConsumerAssignError`, Pulsar's answer). A slot no consumer declares goes to
  nobody: its messages wait until a consumer covering it comes.

A subscription's consumers share one policy (mode and `allow_out_of_order`): a consumer whose
policy differs from the live consumers' is refused (`check`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

import mmh3

from managed_ledger.entry_format import bytes_of
from topics.api import KeySharedPolicy
from topics.errors import ConsumerAssignError, ConsumerBusyError

RANGE_SIZE = 65_536  # slots 0..65535
RING_POINTS = 100  # points per consumer on the AUTO_SPLIT ring (Pulsar's default)
NONE_KEY = b"NONE_KEY"  # what a message without a key hashes as (Pulsar's)
AUTO_SPLIT = KeySharedPolicy()


def slot(key: str) -> int:
    """The key's slot (a key "" is no key)."""
    data = bytes_of(key) if key else NONE_KEY
    return (mmh3.hash(data, 0, signed=False) & 0x7FFFFFFF) % RANGE_SIZE


def check(
    topic: str,
    subscription: str,
    consumer: str,
    policy: KeySharedPolicy,
    others: Mapping[str, KeySharedPolicy],
) -> None:
    """Refuse `consumer`'s policy: bad ranges, a policy unlike the live consumers' (`others`),
    or STICKY ranges that overlap another consumer's."""
    if policy.sticky:
        if not policy.ranges:
            raise ConsumerAssignError(f"consumer {consumer}: a sticky key_shared consumer needs hash ranges")
        for start, end in policy.ranges:
            if not 0 <= start <= end < RANGE_SIZE:
                raise ConsumerAssignError(
                    f"consumer {consumer}: hash range [{start}, {end}] is not within [0, {RANGE_SIZE - 1}]"
                )
    for other, theirs in others.items():
        if other == consumer:
            continue
        if (theirs.sticky, theirs.allow_out_of_order) != (policy.sticky, policy.allow_out_of_order):
            reason = f"another key_shared policy ({theirs})"
            raise ConsumerBusyError(topic, subscription, other, reason=reason)
        if policy.sticky:
            _no_overlap(consumer, policy, other, theirs)
    if policy.sticky:
        _no_overlap(consumer, policy, consumer, policy)


def _no_overlap(consumer: str, policy: KeySharedPolicy, other: str, theirs: KeySharedPolicy) -> None:
    for i, (start, end) in enumerate(policy.ranges):
        for j, (their_start, their_end) in enumerate(theirs.ranges):
            if other == consumer and i >= j:
                continue  # a consumer's own ranges: each pair once
            if start <= their_end and their_start <= end:
                raise ConsumerAssignError(
                    f"Range conflict with consumer {other}: [{start}, {end}]"
                    f" overlaps [{their_start}, {their_end}]"
                )


class Slots:
    """Who owns each slot, for the live consumers and their policies."""

    def __init__(self) -> None:
        self._ring: list[tuple[int, str]] = []  # AUTO_SPLIT: (point, consumer), sorted
        self._ranges: list[tuple[int, int, str]] = []  # STICKY: (start, end, consumer), sorted
        self._starts: list[int] = []

    def set(self, consumers: Iterable[str], policies: Mapping[str, KeySharedPolicy]) -> None:
        live = sorted(consumers)
        sticky = [c for c in live if policies.get(c, AUTO_SPLIT).sticky]
        self._ranges = sorted((s, e, c) for c in sticky for s, e in policies[c].ranges)
        self._starts = [r[0] for r in self._ranges]
        self._ring = [] if sticky else sorted((slot(f"{c}#{i}"), c) for c in live for i in range(RING_POINTS))

    def owner(self, key: str) -> str | None:
        """The consumer of the key's slot; None when no live consumer covers it."""
        s = slot(key)
        if self._ring:
            i = bisect.bisect_left(self._ring, (s, ""))
            return self._ring[i % len(self._ring)][1]
        i = bisect.bisect_right(self._starts, s) - 1
        if i >= 0 and self._ranges[i][1] >= s:
            return self._ranges[i][2]
        return None
