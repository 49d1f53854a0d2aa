"""Dead letters (Pulsar's DeadLetterPolicy): what a message past its subscription's
`max_redeliveries` becomes on the dead-letter topic. `topics.subscriptions` sets such messages
aside while it hands messages out, writes them through a `DeadLetterWriter` (the topics service:
here, or at the broker that owns the dead-letter topic), and acks them on the original only
once they are written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from managed_ledger.entry_format import Message, StoredMessage

# Writes messages to a topic (the dead-letter topic), here or at the broker that owns it.
DeadLetterWriter = Callable[[str, list[Message]], Awaitable[None]]


def letter(m: StoredMessage, topic: str, subscription: str, reason: str) -> Message:
    """The dead letter of `m`: its value, key, event time and properties, plus where it came
    from and why (Pulsar's REAL_TOPIC and ORIGIN_MESSAGE_ID, and Quire's reason)."""
    return Message(
        m.value,
        m.key,
        {
            **(m.properties or {}),
            "REAL_TOPIC": topic,
            "REAL_SUBSCRIPTION": subscription,
            "ORIGIN_MESSAGE_ID": str(m.message_id),
            "DEAD_LETTER_REASON": reason,
        },
        m.event_time,
    )
