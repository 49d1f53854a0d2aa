"""Each dispatcher alone (topics.dispatchers), over a fake subscription state: who may ask, what
each consumer gets, and what a change of consumers asks of the state. The service-level rules
of the types are in test_subscriptions.py and test_subscription_types.py."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import pytest

from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import MessageId
from topics import key_ranges
from topics.api import Delivery, KeySharedPolicy
from topics.dispatchers import (
    Dispatcher,
    KeySharedDispatcher,
    Mine,
    SharedDispatcher,
    SingleActiveDispatcher,
    SubscriptionState,
    dispatcher_for,
)
from topics.errors import ConsumerAssignError, ConsumerBusyError, ConsumerIdRequiredError
from topics.key_shared import KeyRouter
from topics.members import Members
from topics.ready_queue import ReadyQueue

IDLE_MS = 1_000


def msg(
    ledger: int, entry: int, index: int = 0, key: str | None = None, entry_key: str | None = None
) -> StoredMessage:
    return StoredMessage(
        MessageId(ledger, entry, index),
        f"{ledger}:{entry}:{index}".encode(),
        key,
        None,
        None,
        None,
        0,
        entry_key=entry_key,
    )


def batch(ledger: int, entry: int, keys: list[str]) -> list[StoredMessage]:
    """An entry's messages as decode_batch gives them: the entry's key is its first message's."""
    return [msg(ledger, entry, i, key, keys[0]) for i, key in enumerate(keys)]


def ids(out: list[Delivery]) -> list[str]:
    return [d.message.value.decode() for d in out]


class FakeState:
    """A subscription's state as a dispatcher sees it: entries to read per partition (each a
    list of messages), a list of redeliveries, and a record of what the dispatcher asked."""

    topic = "t"
    name = "s"

    def __init__(
        self, entries: Iterable[tuple[int, list[StoredMessage]]] = (), max_unacked: int = 100
    ) -> None:
        self.ready = ReadyQueue()
        self.max_unacked = max_unacked
        self._pending: dict[MessageId, str] = {}
        self.to_read: deque[tuple[int, list[StoredMessage]]] = deque(entries)
        self.waiting: list[tuple[int, StoredMessage, str | None]] = []  # to redeliver, in id order
        self.acked: set[MessageId] = set()
        self.gone: list[list[str]] = []
        self.redelivered_all = 0

    @property
    def pending(self) -> dict[MessageId, str]:
        return self._pending

    def take_redeliveries(
        self,
        out: list[Delivery],
        max_messages: int,
        consumer: str,
        now: int,
        mine: Mine | None,
        whole_entries: bool = False,
    ) -> None:
        keep = []
        for item in sorted(self.waiting, key=lambda w: w[1].message_id):
            partition, message, _ = item
            room = len(out) < max_messages or (
                whole_entries and out and out[-1].message.message_id.position == message.message_id.position
            )
            if room and (mine is None or mine(partition, message)):
                self.hand_out(out, partition, message, now, consumer)
            else:
                keep.append(item)
        self.waiting = keep

    async def read_more(self, wanted: int, only: int | None = None) -> bool:
        for i, (partition, messages) in enumerate(self.to_read):
            if only is None or partition == only:
                del self.to_read[i]
                self.ready.extend((partition, m) for m in messages)
                return True
        return False

    def is_acked(self, partition: int, mid: MessageId) -> bool:
        return mid in self.acked

    def hand_out(
        self, out: list[Delivery], partition: int, message: StoredMessage, now: int, consumer: str
    ) -> None:
        self._pending[message.message_id] = consumer
        out.append(Delivery(message))

    def consumers_left(self, gone: list[str]) -> None:
        self.gone.append(gone)

    def redeliver_all(self) -> None:
        self.redelivered_all += 1

    def held(self) -> list[tuple[StoredMessage, str | None]]:
        return [(m, c) for _, m, c in self.waiting]


def _typed(state: FakeState) -> SubscriptionState:
    return state  # mypy: the fake satisfies the protocol


# --- choice ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "cls", "failover"),
    [
        ("shared", SharedDispatcher, None),
        ("exclusive", SingleActiveDispatcher, False),
        ("failover", SingleActiveDispatcher, True),
        ("key_shared", KeySharedDispatcher, None),
    ],
)
def test_the_type_picks_the_dispatcher(kind: str, cls: type, failover: bool | None) -> None:
    d: Dispatcher = dispatcher_for(kind, _typed(FakeState()), IDLE_MS)  # type: ignore[arg-type]
    assert type(d) is cls
    if failover is not None:
        assert isinstance(d, SingleActiveDispatcher) and d.failover is failover


# --- shared ----------------------------------------------------------------------------------------
async def test_shared_redeliveries_first_then_new_messages_in_read_order_to_anyone() -> None:
    state = FakeState([(0, [msg(1, 0), msg(1, 1)]), (0, [msg(1, 2)])])
    state.waiting = [(0, msg(1, 9), "gone"), (0, msg(1, 8), None)]
    d = SharedDispatcher(state)
    assert d.admit(None, 0) == ""
    assert ids(await d.fill("", 3, 0, False)) == ["1:8:0", "1:9:0", "1:0:0"]
    assert ids(await d.fill("other", 10, 0, False)) == ["1:1:0", "1:2:0"]
    assert await d.fill("", 10, 0, False) == []


async def test_shared_skips_acked_messages_and_stops_at_the_unacked_limit() -> None:
    state = FakeState([(0, [msg(1, 0), msg(1, 1), msg(1, 2), msg(1, 3)])], max_unacked=2)
    state.acked.add(MessageId(1, 1, 0))
    d = SharedDispatcher(state)
    assert ids(await d.fill("", 10, 0, False)) == ["1:0:0", "1:2:0"]
    assert await d.fill("", 10, 0, False) == []  # two unacked: only redeliveries now
    state.waiting = [(0, msg(1, 0), None)]
    assert ids(await d.fill("", 10, 0, False)) == ["1:0:0"]


async def test_shared_with_whole_entries_hands_out_the_last_entry_whole_past_the_max() -> None:
    batch = [msg(1, 0, i) for i in range(3)]
    state = FakeState([(0, batch), (0, [msg(1, 1)])])
    assert ids(await SharedDispatcher(state).fill("", 2, 0, True)) == ["1:0:0", "1:0:1", "1:0:2"]
    state = FakeState([(0, batch), (0, [msg(1, 1)])])
    assert ids(await SharedDispatcher(state).fill("", 2, 0, False)) == ["1:0:0", "1:0:1"]


async def test_shared_over_one_partition_leaves_the_others_messages_waiting() -> None:
    state = FakeState([(0, [msg(1, 0)]), (1, [msg(2, 0)]), (0, [msg(1, 1)])])
    state.waiting = [(1, msg(2, 9), None), (0, msg(1, 9), None)]
    one = SharedDispatcher(state, only=1)
    assert ids(await one.fill("", 10, 0, False)) == ["2:9:0", "2:0:0"]
    assert [m.message_id for _, m, _ in state.waiting] == [MessageId(1, 9, 0)]
    assert ids(await SharedDispatcher(state, only=0).fill("", 10, 0, False)) == ["1:9:0", "1:0:0", "1:1:0"]


def test_shared_keeps_no_consumers() -> None:
    d = SharedDispatcher(FakeState())
    d.heard("c1", 10_000)
    d.left("c1")
    assert d.next_leave_ms() == [] and d.others_ready() is False


# --- exclusive and failover ------------------------------------------------------------------------
@pytest.mark.parametrize("failover", [False, True])
def test_single_active_needs_a_consumer_id(failover: bool) -> None:
    d = SingleActiveDispatcher(FakeState(), Members(IDLE_MS), failover=failover)
    for missing in (None, ""):
        with pytest.raises(ConsumerIdRequiredError):
            d.admit(missing, 0)


async def test_exclusive_refuses_a_second_consumer_while_the_first_is_live() -> None:
    state = FakeState([(0, [msg(1, 0)])])
    d = SingleActiveDispatcher(state, Members(IDLE_MS), failover=False)
    assert d.admit("c1", 0) == "c1"
    assert ids(await d.fill("c1", 10, 0, False)) == ["1:0:0"]
    with pytest.raises(ConsumerBusyError):
        d.admit("c2", IDLE_MS)
    assert state.redelivered_all == 0
    d.admit("c2", IDLE_MS + 1)  # c1 silent past the idle time: c2 takes over, with c1's unacked
    assert state.redelivered_all == 1
    d.admit("c2", IDLE_MS + 2)
    assert state.redelivered_all == 1


async def test_failover_serves_the_first_live_consumer_and_a_change_sends_all_round_again() -> None:
    state = FakeState([(0, [msg(1, 0)]), (0, [msg(1, 1)])])
    d = SingleActiveDispatcher(state, Members(IDLE_MS), failover=True)
    d.admit("c2", 0)
    assert state.redelivered_all == 1  # the first active consumer (nothing was out)
    assert ids(await d.fill("c2", 1, 0, False)) == ["1:0:0"]
    d.admit("c1", 10)  # sorts first: active now
    assert state.redelivered_all == 2
    d.admit("c2", 20)
    assert await d.fill("c2", 10, 20, False) == []  # a standby gets nothing
    assert ids(await d.fill("c1", 10, 20, False)) == ["1:1:0"]
    d.admit("c2", 20 + IDLE_MS + 1)  # c1 silent: gone, c2 active again
    assert state.gone[-1] == ["c1"] and state.redelivered_all == 3
    assert d.next_leave_ms() == [20 + 2 * IDLE_MS + 2]


def test_failover_a_consumer_that_says_it_left_is_gone_at_the_next_admit() -> None:
    state = FakeState()
    d = SingleActiveDispatcher(state, Members(IDLE_MS), failover=True)
    d.admit("c1", 0)
    d.admit("c2", 0)
    d.left("c1")
    d.admit("c2", 1)
    assert state.gone[-1] == ["c1"] and d.members.owner == "c2"


# --- key_shared ------------------------------------------------------------------------------------
async def test_key_shared_sends_each_key_to_one_consumer_in_order() -> None:
    keys = [f"k{i}" for i in range(20)]
    state = FakeState([(0, [msg(1, i, key=k) for i, k in enumerate(keys)])])
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    with pytest.raises(ConsumerIdRequiredError):
        d.admit(None, 0)
    d.admit("a", 0)
    d.admit("b", 0)
    got = {c: await d.fill(c, 100, 0, False) for c in ("a", "b")}
    assert got["a"] and got["b"]  # 20 keys spread over both
    for c, out in got.items():
        assert all(d.keys.consumer_of(m.message.key or "") == c for m in out)
        entries = [m.message.message_id.entry_id for m in out]
        assert entries == sorted(entries)
    assert sorted(ids(got["a"] + got["b"])) == sorted(f"1:{i}:0" for i in range(20))


async def test_key_shared_redelivers_a_key_only_to_its_consumer() -> None:
    state = FakeState()
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    d.admit("b", 0)
    key_of = {c: next(k for k in (f"k{i}" for i in range(100)) if d.keys.consumer_of(k) == c) for c in "ab"}
    state.waiting = [(0, msg(1, 0, key=key_of["a"]), None), (0, msg(1, 1, key=key_of["b"]), None)]
    assert ids(await d.fill("b", 10, 0, False)) == ["1:1:0"]
    assert ids(await d.fill("a", 10, 0, False)) == ["1:0:0"]


async def test_key_shared_a_change_of_consumers_reroutes_and_wakes_the_others() -> None:
    state = FakeState()
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    assert d.others_ready() is True and d.others_ready() is False
    d.admit("a", 1)  # no change
    assert d.others_ready() is False
    d.admit("b", IDLE_MS + 2)  # b joins, a (last heard at 1) has gone silent
    assert state.gone[-1] == ["a"] and d.others_ready() is True
    assert d.members.live.keys() == {"b"}
    d.admit("a", IDLE_MS + 2)
    d.others_ready()
    d.admit("b", 2 * IDLE_MS + 3)  # a leaves, nobody joins: its keys go to b
    assert state.gone[-1] == ["a"] and d.others_ready() is True
    assert {d.keys.consumer_of(f"k{i}") for i in range(50)} == {"b"}


def test_key_shared_a_sticky_key_follows_the_ring_once_its_messages_are_settled() -> None:
    ring = KeyRouter()
    ring.set_consumers({"a", "b"})
    key = next(k for k in (f"k{i}" for i in range(1000)) if ring.consumer_of(k) == "b")
    state = FakeState()
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    held = msg(1, 0, key=key)
    state.waiting = [(0, held, "a")]  # out with a: the key stays with a when b joins
    d.admit("b", 1)
    assert d.keys.consumer_of(key) == "a" and d.keys.sticky == {key: 1}
    d.settled(held)
    assert d.keys.sticky == {} and d.keys.consumer_of(key) == "b"


async def test_key_shared_clear_drops_what_is_queued() -> None:
    state = FakeState([(0, [msg(1, i, key=f"k{i}") for i in range(10)])])
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    d.admit("b", 0)
    await d.fill("a", 100, 0, False)
    assert d.keys.queued > 0  # b's keys, queued for it
    d.clear()
    assert d.keys.queued == 0 and await d.fill("b", 100, 0, False) == []


async def test_key_shared_whole_entries_send_a_batch_whole_to_its_first_key_consumer() -> None:
    """A push consumer's entries go whole, by the entry's key (Pulsar routes a batch by its
    metadata's key): a batch of several keys is never split between consumers, nor cut at a
    consumer's permits (the client acks a batch as its entry)."""
    probe = KeyRouter()
    probe.set_consumers({"a", "b"})
    key_a = next(k for k in (f"k{i}" for i in range(1000)) if probe.consumer_of(k) == "a")
    key_b = next(k for k in (f"k{i}" for i in range(1000)) if probe.consumer_of(k) == "b")
    entries = [batch(1, 0, [key_a, key_b, key_a, key_b]), batch(1, 1, [key_b, key_a, key_b])]
    entries.append(batch(1, 2, [key_a] * 5))
    state = FakeState([(0, entries[0] + entries[1] + entries[2])])
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    d.admit("b", 0)
    got_a = await d.fill("a", 2, 0, True)  # 2 permits: entry 1:0 (4 messages) goes whole
    assert ids(got_a) == [f"1:0:{i}" for i in range(4)]
    got_b = await d.fill("b", 100, 0, True)
    assert ids(got_b) == [f"1:1:{i}" for i in range(3)]
    got_a += await d.fill("a", 1, 0, True)
    assert ids(got_a)[4:] == [f"1:2:{i}" for i in range(5)]


async def test_key_shared_whole_entries_redeliver_an_entry_whole() -> None:
    state = FakeState()
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.admit("a", 0)
    state.waiting = [(0, m, None) for m in batch(1, 0, ["x", "y", "z"])]
    assert ids(await d.fill("a", 1, 0, True)) == ["1:0:0", "1:0:1", "1:0:2"]


async def test_key_shared_sticky_ranges_route_by_murmur3_slot() -> None:
    keys = [f"key-{i}" for i in range(200)]
    state = FakeState([(0, [msg(1, i, key=k) for i, k in enumerate(keys)])], max_unacked=1000)
    d = KeySharedDispatcher(state, Members(IDLE_MS))
    d.join("low", KeySharedPolicy(sticky=True, ranges=((0, 32767),)), 0)
    got_low = await d.fill("low", 1000, 0, False)
    assert got_low and all(key_ranges.slot(m.message.key or "") <= 32767 for m in got_low)
    assert len(got_low) < len(keys)  # the upper slots wait for a consumer that covers them
    d.join("high", KeySharedPolicy(sticky=True, ranges=((32768, 65535),)), 1)
    got_high = await d.fill("high", 1000, 1, False)
    assert all(key_ranges.slot(m.message.key or "") >= 32768 for m in got_high)
    assert sorted(ids(got_low + got_high)) == sorted(f"1:{i}:0" for i in range(200))


def test_key_shared_slot_is_murmur3_of_the_key_mod_65536() -> None:
    import mmh3

    for key in ["a", "order-17", "\u00e9t\u00e9"]:
        assert key_ranges.slot(key) == (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF) % 65536
    assert key_ranges.slot("") == (mmh3.hash(b"NONE_KEY", 0, signed=False) & 0x7FFFFFFF) % 65536
    # Murmur3_32 x86, seed 0 (the reference test vector): "hello" -> 0x248BFA47
    assert mmh3.hash(b"hello", 0, signed=False) == 0x248BFA47


@pytest.mark.parametrize(
    ("ranges", "error"),
    [
        (((0, 100),), "Range conflict with consumer a"),
        (((50, 60), (199, 300)), "Range conflict with consumer a"),
        (((300, 400), (350, 500)), "Range conflict with consumer b"),  # its own ranges overlap
        (((10, 5),), "not within"),
        (((0, 65536),), "not within"),
        ((), "needs hash ranges"),
    ],
)
def test_key_shared_sticky_ranges_are_refused_when_they_overlap_or_are_out_of_bounds(
    ranges: tuple[tuple[int, int], ...], error: str
) -> None:
    d = KeySharedDispatcher(FakeState(), Members(IDLE_MS))
    d.join("a", KeySharedPolicy(sticky=True, ranges=((100, 199),)), 0)
    with pytest.raises(ConsumerAssignError, match=error):
        d.join("b", KeySharedPolicy(sticky=True, ranges=ranges), 0)
    assert d.members.live.keys() == {"a"}


def test_key_shared_a_policy_unlike_the_live_consumers_is_refused() -> None:
    d = KeySharedDispatcher(FakeState(), Members(IDLE_MS))
    d.join("a", KeySharedPolicy(), 0)
    with pytest.raises(ConsumerBusyError):
        d.join("b", KeySharedPolicy(sticky=True, ranges=((0, 10),)), 0)
    with pytest.raises(ConsumerBusyError):
        d.join("b", KeySharedPolicy(allow_out_of_order=True), 0)
    d.left("a")  # gone: its ranges and policy no longer count
    d.join("b", KeySharedPolicy(sticky=True, ranges=((0, 10),)), 1)
    d.join("c", KeySharedPolicy(sticky=True, ranges=((11, 20),)), 1)
    assert d.members.live.keys() == {"b", "c"}


def test_key_shared_out_of_order_delivery_moves_a_held_key_at_once() -> None:
    for allow, owner in ((False, "a"), (True, "b")):
        ring = KeyRouter()
        ring.set_consumers({"a", "b"})
        key = next(k for k in (f"k{i}" for i in range(1000)) if ring.consumer_of(k) == "b")
        state = FakeState()
        d = KeySharedDispatcher(state, Members(IDLE_MS))
        d.join("a", KeySharedPolicy(allow_out_of_order=allow), 0)
        state.waiting = [(0, msg(1, 0, key=key), "a")]  # out with a when b joins
        d.join("b", KeySharedPolicy(allow_out_of_order=allow), 1)
        assert d.keys.consumer_of(key) == owner
