"""A subscription's options as stored with its cursors (their properties), and back."""

from __future__ import annotations

from managed_ledger.api import InitialPosition
from topics.api import SubscriptionOptions, SubscriptionType

SUBSCRIPTION_TYPES: tuple[SubscriptionType, ...] = ("shared", "exclusive", "failover", "key_shared")


def options_to_properties(options: SubscriptionOptions) -> dict[str, object]:
    return {
        "type": options.type,
        "initial_position": options.initial_position,
        "read_compacted": options.read_compacted,
        "ack_timeout_ms": options.ack_timeout_ms,
        "max_redeliveries": options.max_redeliveries,
        "dead_letter_topic": options.dead_letter_topic,
    }


def options_from_properties(props: dict[str, object]) -> SubscriptionOptions:
    stored = props.get("type")
    sub_type: SubscriptionType = next((t for t in SUBSCRIPTION_TYPES if t == stored), "shared")
    initial: InitialPosition = "earliest" if props.get("initial_position") == "earliest" else "latest"
    timeout = props.get("ack_timeout_ms")
    limit = props.get("max_redeliveries")
    dlq = props.get("dead_letter_topic")
    return SubscriptionOptions(
        initial_position=initial,
        type=sub_type,
        read_compacted=props.get("read_compacted") is True,
        ack_timeout_ms=timeout if isinstance(timeout, int) and timeout > 0 else None,
        max_redeliveries=limit if isinstance(limit, int) and limit > 0 else 0,
        dead_letter_topic=dlq if isinstance(dlq, str) else None,
    )
