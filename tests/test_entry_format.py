from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from managed_ledger.entry_format import (
    BINARY_MARK,
    EntryFormatError,
    Message,
    batch_publish_time,
    batch_sequence,
    bytes_of,
    decode_batch,
    decode_compacted,
    encode_batch,
    encode_compacted,
    iter_messages,
    text_of,
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


@given(st.binary(max_size=32), st.binary(max_size=32))
def test_kafka_bytes_map_to_text_one_to_one_and_back(a: bytes, b: bytes) -> None:
    assert bytes_of(text_of(a)) == a
    assert (text_of(a) == text_of(b)) == (a == b)
    text_of(a).encode("utf-8")  # always valid text: msgpack and Arrow take it


def test_text_keys_stay_as_they_are_and_binary_ones_are_marked() -> None:
    assert text_of(b"user-1") == "user-1" and bytes_of("user-1") == b"user-1"
    assert text_of(b"\xff\x01") == BINARY_MARK + "ff01"
    assert text_of(b"\xef\xbf\xbd\x01") != text_of(b"\xff\x01")  # no longer both U+FFFD 0x01
    marked = (BINARY_MARK + "x").encode()
    assert text_of(marked) == BINARY_MARK + marked.hex() and bytes_of(text_of(marked)) == marked
    assert bytes_of(BINARY_MARK + "not hex") == (BINARY_MARK + "not hex").encode()


def test_entry_level_fields_round_trip_and_leave_the_first_three_elements_as_they_were() -> None:
    """A Pulsar SEND's ordering key and delivery time are the entry's (the first message's), in
    an optional fourth body element: readers of the first three see the entry as before."""
    from managed_ledger.entry_format import decode_batch_header, encode_batch_raw

    sent = [Message(b"a", key="k1", ordering_key=b"\xffo", deliver_at=123), Message(b"b", key="k2")]
    payload = encode_batch(7, "p", sent)
    out = decode_batch(1, 2, payload)
    assert [(m.ordering_key, m.deliver_at, m.entry_key) for m in out] == [
        (b"\xffo", 123, text_of(b"\xffo"))
    ] * 2
    assert decode_batch_header(payload) == (
        7,
        "p",
        [["k1", b"a", None, None, None], ["k2", b"b", None, None, None]],
    )
    plain = decode_batch(
        1, 3, encode_batch_raw(7, "p", [[None, b"x", None, None, None], ["k", b"y", None, None, None]])
    )
    assert [(m.ordering_key, m.deliver_at, m.entry_key) for m in plain] == [(None, None, "")] * 2
