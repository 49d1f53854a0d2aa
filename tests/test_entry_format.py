from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from managed_ledger.entry_format import (
    EntryFormatError,
    Message,
    batch_publish_time,
    batch_sequence,
    decode_batch,
    decode_compacted,
    encode_batch,
    encode_compacted,
    iter_messages,
)
from managed_ledger.position import MessageId, Position

messages = st.builds(
    Message,
    value=st.binary(max_size=64),
    key=st.none() | st.text(max_size=8),
    properties=st.none() | st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    event_time=st.none() | st.integers(0, 2**62),
    sequence_id=st.none() | st.integers(0, 2**62),
)


@given(
    st.lists(messages, min_size=1, max_size=20),
    st.integers(0, 2**62),
    st.none() | st.text(max_size=8),
)
def test_batch_round_trip(msgs: list[Message], publish_time: int, producer: str | None) -> None:
    payload = encode_batch(publish_time, producer, msgs)
    out = decode_batch(7, 3, payload)
    assert [m.message_id for m in out] == [MessageId(7, 3, i) for i in range(len(msgs))]
    for m, o in zip(msgs, out, strict=True):
        assert (o.value, o.key, o.event_time, o.sequence_id) == (
            m.value,
            m.key,
            m.event_time,
            m.sequence_id,
        )
        assert (o.properties or None) == (m.properties or None)
        assert o.publish_time == publish_time and o.producer_name == producer
    assert batch_publish_time(payload) == publish_time
    seqs = [m.sequence_id for m in msgs if m.sequence_id is not None]
    assert batch_sequence(payload) == (producer, max(seqs) if seqs else None)
    compacted = encode_compacted(out)
    assert decode_compacted(compacted) == out
    assert list(iter_messages(99, 99, compacted)) == out


@pytest.mark.parametrize("payload", [b"", b"Q", b"\x51\x02\x00\x90", b"\x00\x01\x00", b"\x51\x01\x00\xc1"])
def test_bad_payloads_are_refused(payload: bytes) -> None:
    with pytest.raises(EntryFormatError):
        decode_batch(1, 1, payload)


def test_message_id_parse_and_order() -> None:
    assert MessageId.parse("12:40:3") == MessageId(12, 40, 3)
    assert MessageId.parse("12:40") == MessageId(12, 40, 0)
    assert str(MessageId(1, 2, 3)) == "1:2:3"
    assert MessageId(1, 9, 9) < MessageId(2, 0, 0) < MessageId(2, 0, 1)
    assert MessageId(5, 6, 0).position == Position(5, 6)
    for bad in ["", "a:b:c", "1", "1:2:3:4", "1:-2:0", "1:2:x"]:
        with pytest.raises(ValueError):
            MessageId.parse(bad)
