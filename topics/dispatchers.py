"""Who gets which message of a subscription: one dispatcher per subscription type (Pulsar's
PersistentDispatcherMultipleConsumers, ...SingleActiveConsumer and ...StickyKeyDispatcher...),
chosen once, when the subscription is built (`dispatcher_for`, as Pulsar's `addConsumer` does).

The subscription (`topics.subscriptions`) keeps the state every type shares: what is pending,
what waits for redelivery, the read-ahead, the counts and acks. A dispatcher decides who may
ask (`admit`) and what a consumer that asks gets (`fill`), through the narrow `SubscriptionState`
below; it never acks. The types:

- **shared** (`SharedDispatcher`): each message to whichever consumer asks, redeliveries first.
  With `only`, the messages of one partition alone, the same way: the Pulsar door's partition
  consumers, each its own Pulsar subscription over one partition, whatever the type.
- **exclusive** and **failover** (`SingleActiveDispatcher`): one consumer receives, and gets what
  shared would. Exclusive refuses another consumer while the one it serves is live (`claim`);
  failover's active consumer is the first by sorted id among the live ones, the others get
  nothing until it goes silent. A change of the consumer receiving sends its unacked messages
  round again, to the new one.
- **key_shared** (`KeySharedDispatcher`): each key to one consumer, in order (`topics.key_shared`
  owns the assignment); messages read from the cursors are queued for their key's consumer as
  they are read.

Every type but shared needs a consumer id. Consumers come and go through `topics.members`.

One seam for pull and push. A REST consumer pulls: `fill(max_messages)` per request, the
request's long poll waiting in the data plane. The Pulsar door pushes under flow control: its
consumer task calls the same `fill` with the permits the client gave (FLOW) as `max_messages`
and `whole_entries`, so the last entry handed out goes whole, past the permits, as Pulsar's
dispatcher sends a batch whole; the permits left are what the next call asks for. Both wait
for the same wake-ups: new messages, a redelivery due (`next_leave_ms`), or messages queued for
another consumer (`others_ready`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import MessageId
from topics import key_ranges, key_shared
from topics.api import Delivery, KeySharedPolicy, SubscriptionType
from topics.errors import ConsumerBusyError, ConsumerIdRequiredError
from topics.key_shared import KeyRouter
from topics.members import Members
from topics.ready_queue import ReadyQueue

# Whether a message waiting for redelivery (its partition, the message) is for the consumer asking.
Mine = Callable[[int, StoredMessage], bool]


class SubscriptionState(Protocol):
    """What a dispatcher uses of its subscription (`topics.subscriptions.Subscription`)."""

    topic: str
    name: str
    ready: ReadyQueue  # read from the cursors, not handed out yet
    max_unacked: int

    @property
    def pending(self) -> Mapping[MessageId, object]: ...

    def take_redeliveries(
        self,
        out: list[Delivery],
        max_messages: int,
        consumer: str,
        now: int,
        mine: Mine | None,
        whole_entries: bool = False,
    ) -> None:
        """Hand out what waits for redelivery, in id order, up to max_messages in `out` (only
        what `mine` accepts, when given; the rest keeps waiting); with `whole_entries`, the
        last entry's messages that wait too, past max_messages."""
        ...

    async def read_more(self, wanted: int, only: int | None = None) -> bool:
        """Read entries into `ready` (from partition `only` alone, when given); False when
        every cursor is at its end."""
        ...

    def is_acked(self, partition: int, mid: MessageId) -> bool: ...

    def hand_out(
        self, out: list[Delivery], partition: int, message: StoredMessage, now: int, consumer: str
    ) -> None:
        """Deliver to `consumer` (into `out`), or set aside for the dead-letter topic."""
        ...

    def consumers_left(self, gone: list[str]) -> None:
        """What these consumers held unacked waits for redelivery, held by nobody."""
        ...

    def redeliver_all(self) -> None:
        """Every unacked message goes round again, in order (the consumer receiving changed)."""
        ...

    def held(self) -> Iterable[tuple[StoredMessage, str | None]]:
        """The messages delivered and not acked, each with the consumer that had it last."""
        ...


class Dispatcher(Protocol):
    def admit(self, consumer_id: str | None, now: int) -> str:
        """A consumer asks: refuse it if it may not, note it live, and act on consumers that
        left. The consumer's name for `fill`."""
        ...

    async def fill(self, consumer: str, max_messages: int, now: int, whole_entries: bool) -> list[Delivery]:
        """Up to max_messages for `consumer` (admitted), redeliveries first. `whole_entries`:
        the last new entry goes whole, past max_messages (a push consumer's permits)."""
        ...

    def heard(self, consumer: str | None, until_ms: int) -> None:
        """`consumer` waits in a long poll until `until_ms`: it stays live that long."""
        ...

    def left(self, consumer: str) -> None:
        """`consumer` says it is gone (the next consumer to ask sees it leave)."""
        ...

    def next_leave_ms(self) -> list[int]:
        """When each live consumer leaves unless heard from again."""
        ...

    def others_ready(self) -> bool:
        """Whether other consumers' long polls should look again (once per change)."""
        ...

    def settled(self, message: StoredMessage) -> None:
        """A message handed out is acked."""
        ...

    def clear(self) -> None:
        """Nothing is out or queued any more (a seek)."""
        ...


def dispatcher_for(kind: SubscriptionType, state: SubscriptionState, idle_ms: int) -> Dispatcher:
    """The dispatcher of a subscription of this type (chosen once, when it is built)."""
    if kind == "shared":
        return SharedDispatcher(state)
    if kind == "key_shared":
        return KeySharedDispatcher(state, Members(idle_ms))
    return SingleActiveDispatcher(state, Members(idle_ms), failover=kind == "failover")


def _consumer_id(state: SubscriptionState, consumer_id: str | None, kind: str) -> str:
    if not consumer_id:
        raise ConsumerIdRequiredError(state.topic, state.name, kind)
    return consumer_id


class SharedDispatcher:
    """shared: to whichever consumer asks, in read order (of partition `only`, when given)."""

    def __init__(self, state: SubscriptionState, only: int | None = None) -> None:
        self._state = state
        self._only = only
        self._mine: Mine | None = None if only is None else (lambda partition, _: partition == only)

    def admit(self, consumer_id: str | None, now: int) -> str:
        return consumer_id or ""

    async def fill(self, consumer: str, max_messages: int, now: int, whole_entries: bool) -> list[Delivery]:
        state, only = self._state, self._only
        out: list[Delivery] = []
        state.take_redeliveries(out, max_messages, consumer, now, self._mine, whole_entries)
        while len(out) < max_messages and len(state.pending) < state.max_unacked:
            ready = state.ready.take(only)
            if ready is None:
                if not await state.read_more(max_messages - len(out), only):
                    break
                continue
            partition, message = ready
            if not state.is_acked(partition, message.message_id):
                state.hand_out(out, partition, message, now, consumer)
        last = out[-1].message.message_id.position if whole_entries and out else None
        while last is not None and (ready := state.ready.take_of_entry(last, only)) is not None:
            partition, message = ready
            if not state.is_acked(partition, message.message_id):
                state.hand_out(out, partition, message, now, consumer)
        return out

    def heard(self, consumer: str | None, until_ms: int) -> None:
        pass  # shared keeps no consumers

    def left(self, consumer: str) -> None:
        pass

    def next_leave_ms(self) -> list[int]:
        return []

    def others_ready(self) -> bool:
        return False

    def settled(self, message: StoredMessage) -> None:
        pass

    def clear(self) -> None:
        pass


class _WithMembers:
    """A dispatcher that keeps its consumers' membership: heard, left and leave deadlines are
    the `Members`' own."""

    members: Members

    def heard(self, consumer: str | None, until_ms: int) -> None:
        self.members.heard(consumer, until_ms)

    def left(self, consumer: str) -> None:
        self.members.left(consumer)

    def next_leave_ms(self) -> list[int]:
        return self.members.next_leave_ms()


class SingleActiveDispatcher(_WithMembers):
    """exclusive (`failover=False`) and failover: one consumer receives, as shared would."""

    def __init__(self, state: SubscriptionState, members: Members, *, failover: bool) -> None:
        self._state = state
        self.members = members
        self.failover = failover
        self._in_order = SharedDispatcher(state)

    def admit(self, consumer_id: str | None, now: int) -> str:
        state = self._state
        consumer = _consumer_id(state, consumer_id, "failover" if self.failover else "exclusive")
        if self.failover:
            change = self.members.join(consumer, now, failover=True)
            state.consumers_left(change.gone)
            if change.new_active is not None:
                state.redeliver_all()  # the previous active consumer's unacked go to the new one
            return consumer
        owner = self.members.busy(consumer, now)
        if owner is not None:
            raise ConsumerBusyError(state.topic, state.name, owner)
        if self.members.claim(consumer, now):
            state.redeliver_all()  # the previous consumer is gone: its unacked go to the new one
        return consumer

    async def fill(self, consumer: str, max_messages: int, now: int, whole_entries: bool) -> list[Delivery]:
        if self.failover and consumer != self.members.owner:
            return []  # a standby: it takes over when the active consumer goes silent
        return await self._in_order.fill(consumer, max_messages, now, whole_entries)

    def others_ready(self) -> bool:
        return False

    def settled(self, message: StoredMessage) -> None:
        pass

    def clear(self) -> None:
        pass  # the consumer receiving stays


class KeySharedDispatcher(_WithMembers):
    """key_shared: each key to one live consumer, in order (`topics.key_shared`), by the
    consumers' policies (`topics.key_ranges`: AUTO_SPLIT or STICKY hash ranges)."""

    def __init__(self, state: SubscriptionState, members: Members) -> None:
        self._state = state
        self.members = members
        self.keys = KeyRouter()
        self.policies: dict[str, KeySharedPolicy] = {}  # consumers that declared one

    def join(self, consumer_id: str | None, policy: KeySharedPolicy, now: int) -> None:
        """A consumer declares its policy (a Pulsar SUBSCRIBE's keySharedMeta) and joins:
        refused (ConsumerAssignError, ConsumerBusyError) when it does not fit the live ones'."""
        state = self._state
        consumer = _consumer_id(state, consumer_id, "key_shared")
        members = self.members
        live = {
            c: self.policies.get(c, key_ranges.AUTO_SPLIT)
            for c, heard in members.live.items()
            if now - heard <= members.idle_ms  # not one that said it left
        }
        key_ranges.check(state.topic, state.name, consumer, policy, live)
        changed = self.policies.get(consumer) != policy
        self.policies[consumer] = policy
        self.admit(consumer, now, changed)

    def admit(self, consumer_id: str | None, now: int, changed: bool = False) -> str:
        state = self._state
        consumer = _consumer_id(state, consumer_id, "key_shared")
        change = self.members.join(consumer, now, failover=False)
        state.consumers_left(change.gone)
        for gone in change.gone:
            self.policies.pop(gone, None)
        if change.joined or change.gone or changed:
            self.keys.set_consumers(self.members.live, state.held(), self.policies)
        return consumer

    async def fill(self, consumer: str, max_messages: int, now: int, whole_entries: bool) -> list[Delivery]:
        """Redeliveries of this consumer's keys, then new messages from its queue; messages read
        from the cursors are queued for the consumer of their key as they are read.
        `whole_entries` (a push consumer): keys are the entries' from then on, so that an entry
        goes whole to one consumer, and the last entry handed out is completed past the permits."""
        state, keys = self._state, self.keys
        if whole_entries and not keys.by_entry:
            keys.by_entry = True  # queued messages move to their entry key's consumer
            keys.set_consumers(self.members.live, state.held(), self.policies)
        if state.ready:
            keys.route(state.ready, consumer)  # delayed messages due now (topics.delayed)
        out: list[Delivery] = []
        state.take_redeliveries(
            out, max_messages, consumer, now, lambda _, m: keys.consumer_of(keys.key_of(m)) == consumer,
            whole_entries,
        )  # fmt: skip
        while len(out) < max_messages and len(state.pending) < state.max_unacked:
            room = min(max_messages - len(out), state.max_unacked - len(state.pending))
            items = keys.take(consumer, room)
            if whole_entries:  # an entry's messages are queued together: the last one's rest
                keys.take_of_entry(consumer, items)
            if not items:
                if keys.queued >= key_shared.READ_AHEAD:
                    break  # the read-ahead is full of other consumers' keys
                if not await state.read_more(max_messages - len(out)):
                    break
                keys.route(state.ready, consumer)
                continue
            for partition, message in items:
                if state.is_acked(partition, message.message_id):
                    keys.settled(message)
                    continue
                state.hand_out(out, partition, message, now, consumer)
        return out

    def others_ready(self) -> bool:
        return self.keys.others_ready()

    def settled(self, message: StoredMessage) -> None:
        if self.keys.sticky:
            self.keys.settled(message)

    def clear(self) -> None:
        self.keys.clear()
