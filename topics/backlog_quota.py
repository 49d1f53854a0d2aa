"""Backlog quotas (Pulsar's BacklogQuota): the policy's stored form, its resolution and API
shape, and the per-topic state the broker keeps to enforce it cheaply.

Two types, each resolved on its own (topic > namespace; the settings set none):

- `destination_storage`: the backlog in bytes of the slowest subscription, i.e. the bytes stored
  after the oldest mark-delete position of the topic's cursors (estimated per ledger at its
  average entry size: `ManagedLedger.size_after`), is over `limitSize`.
- `message_age`: the oldest message not acked by the slowest subscription was published more than
  `limitTime` seconds ago.

A quota is exceeded when the figure is over the limit: a backlog exactly at it is allowed (Pulsar
refuses at it; a "limit" of N bytes that refuses N bytes surprised us). A partitioned topic is
measured per partition, as Pulsar does (each partition is a topic there): it is over its quota
when any partition is. A topic without subscriptions has no backlog.

What happens past the limit (`policy`), checked when a produce arrives (there is no producer
connection over HTTP) and every `backlog_quota_check_interval_ms`:
`producer_exception` refuses the produce (BacklogQuotaExceededError, 429); `producer_request_hold`
holds it until the backlog is back under the limit or `backlog_quota_hold_timeout_ms` passes (then
the same 429); `consumer_backlog_eviction` takes it and moves the slowest cursors forward (acks
their oldest messages) until the backlog is within the limit again.

Stored in the scope's policies under "backlogQuota" as `{type: {"limitSize": int,
"limitTime": int, "policy": str}}` (a limit not given is left out).

Values are Pulsar's (what `pulsar-admin namespaces set-backlog-quota` sends by default): a
`limitSize` of -1 and a `limitTime` of 0 or less mean "no such limit", and are stored as a limit
left out. A quota set in part keeps the other fields of the quota of that type in effect (the
scope's own, else the next level's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol, get_args

from managed_ledger.position import Position
from topics.api import BacklogQuota, QuotaPolicy, QuotaType
from topics.errors import InvalidPolicyError

POLICY = "backlogQuota"
QUOTA_TYPES: tuple[QuotaType, ...] = get_args(QuotaType)
QUOTA_POLICIES: tuple[QuotaPolicy, ...] = get_args(QuotaPolicy)
_LIMIT_OF: dict[QuotaType, str] = {"destination_storage": "limitSize", "message_age": "limitTime"}
_FIELDS = ("limitSize", "limitTime", "policy")
PRODUCER_POLICIES: tuple[QuotaPolicy, ...] = ("producer_exception", "producer_request_hold")
EVICTION: QuotaPolicy = "consumer_backlog_eviction"


def check_type(quota_type: str) -> QuotaType:
    for known in QUOTA_TYPES:
        if quota_type == known:
            return known
    raise InvalidPolicyError(POLICY, f"unknown backlogQuotaType {quota_type!r}; known: {list(QUOTA_TYPES)}")


def validate_quota(quota_type: str, value: Any, keep: BacklogQuota | None = None) -> dict[str, Any]:
    """The stored form of one quota, or InvalidPolicyError saying what is wrong. `keep`: the
    quota of that type in effect, whose fields stand where `value` gives none."""
    kind = check_type(quota_type)
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(POLICY, f"expected an object with {list(_FIELDS)}")
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise InvalidPolicyError(POLICY, f"unknown fields {unknown}; expected {list(_FIELDS)}")
    merged = {k: v for k, v in api_dict(keep).items() if v is not None} if keep is not None else {}
    merged.update({k: v for k, v in value.items() if v is not None})
    policy = merged.get("policy")
    if policy not in QUOTA_POLICIES:
        raise InvalidPolicyError(POLICY, f"policy must be one of {list(QUOTA_POLICIES)}, got {policy!r}")
    out: dict[str, Any] = {"policy": policy}
    for key in ("limitSize", "limitTime"):
        v = merged.get(key)
        if v is None or _no_limit(key, v):
            continue
        if type(v) is not int or v < 0:
            raise InvalidPolicyError(POLICY, f"{key} must be an integer >= 0, or -1 for no limit; got {v!r}")
        out[key] = v
    if _LIMIT_OF[kind] not in out:
        raise InvalidPolicyError(POLICY, f"a {kind} quota needs {_LIMIT_OF[kind]} (a limit, not -1)")
    return out


def _no_limit(key: str, v: Any) -> bool:
    """Pulsar's "no such limit": limitSize -1, a limitTime of 0 or less."""
    if type(v) is not int:
        return False
    return v == -1 if key == "limitSize" else v <= 0


def validate_map(value: Any) -> dict[str, Any]:
    """The stored form of a whole map `{type: quota}` (the generic policy path)."""
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(POLICY, f"expected an object keyed by {list(QUOTA_TYPES)}")
    return {check_type(k): validate_quota(k, v) for k, v in value.items()}


def parse(stored: Any) -> dict[QuotaType, BacklogQuota]:
    """One scope's stored quotas; bad stored values are ignored, never fatal."""
    out: dict[QuotaType, BacklogQuota] = {}
    if not isinstance(stored, Mapping):
        return out
    for kind in QUOTA_TYPES:
        try:
            v = validate_quota(kind, stored.get(kind))
        except InvalidPolicyError:
            continue
        out[kind] = BacklogQuota(v["policy"], v.get("limitSize"), v.get("limitTime"))
    return out


def api_dict(quota: BacklogQuota) -> dict[str, Any]:
    return {"limitSize": quota.limit_size, "limitTime": quota.limit_time, "policy": quota.policy}


def api_map(quotas: Mapping[QuotaType, BacklogQuota]) -> dict[str, Any]:
    """GET backlogQuotaMap: the types set, in Pulsar's shape."""
    return {kind: api_dict(quotas[kind]) for kind in QUOTA_TYPES if kind in quotas}


def exceeded(
    quota_type: QuotaType, quota: BacklogQuota, backlog_bytes: int, oldest_ms: int | None, now_ms: int
) -> bool:
    """Over the limit (strictly: a backlog exactly at the limit is allowed)."""
    if quota_type == "destination_storage":
        return quota.limit_size is not None and backlog_bytes > quota.limit_size
    if quota.limit_time is None or oldest_ms is None:
        return False
    return now_ms - oldest_ms > quota.limit_time * 1000


def slowest(cursors: Mapping[str, Any]) -> Position | None:
    """The oldest mark-delete position of the cursors (None: no cursor, no backlog)."""
    positions: list[Position] = [c.mark_delete_position for c in cursors.values()]
    return min(positions) if positions else None


class Wake(Protocol):
    """`topics.topic.Notifier`: held produces arm it, a change notifies it."""

    def arm(self) -> asyncio.Future[None]: ...

    def notify(self) -> None: ...


class QuotaState:
    """Per open topic: the last measured backlog (cached; `dirty` after a produce or an ack, and
    measured again at most `fresh_until` later anyway), the counts of quota events, and the
    wake-up of produces held by `producer_request_hold`.

    Counts (in memory, from when the topic was opened here): `held` produces held, `refused`
    produces refused (by producer_exception, or a hold that timed out), `evicted` cursors moved
    forward by consumer_backlog_eviction (one per subscription and partition moved)."""

    __slots__ = (
        "dirty",
        "evicted",
        "first_unacked",
        "fresh_until",
        "held",
        "oldest_ms",
        "on_change",
        "refused",
        "size_bytes",
        "wake",
    )

    def __init__(self, wake: Wake, on_change: Callable[[], None] | None = None) -> None:
        self.wake = wake
        self.on_change = on_change  # the topic's activity mark (topics.activity)
        self.held = self.refused = self.evicted = 0
        self.dirty = True
        self.fresh_until = 0.0  # loop time
        self.size_bytes = 0  # the largest backlog of a partition, bytes
        self.oldest_ms: int | None = None  # publish time of the oldest unacked message
        self.first_unacked: dict[int, tuple[Position, int]] = {}  # partition -> (position, publish ms)

    def changed(self) -> None:
        """Acks, seeks, expiry or eviction moved a cursor: measure again, wake held produces."""
        self.dirty = True
        self.wake.notify()
        if self.on_change is not None:
            self.on_change()

    def events(self) -> dict[str, int]:
        return {"held": self.held, "refused": self.refused, "evicted": self.evicted}
