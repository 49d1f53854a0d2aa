"""The campaign's load: careful producers with dedup, consumers that ack as they go, readers that
page from earliest, and compactions triggered now and then; everything they see goes into the
`History`.

- A producer sends batches of 1..N messages with its own `producer_name` and consecutive
  `sequence_id`s, one batch at a time, and sends the *same* batch (same name, same ids) again
  until it gets a 200: through redirects, 503s, timeouts and dead brokers.
- A fickle producer per topic does not retry: a batch that gets no 200 within a few seconds
  is abandoned and the producer goes on with *other* messages under new sequence ids, as a
  client that gives up (or sends something else after a failure) does. An abandoned batch may
  or may not be stored; whatever is stored must be stored whole-heartedly (readable to the end,
  delivered, in the compacted view when newest), and what is not stored must never be seen by a
  reader, a consumer or the compacted view.
- Consumers pull from four subscriptions per topic, all created at `earliest` before the first
  produce: shared (two consumers, c0 and c1), exclusive (x0), failover (f0 and f1) and
  key_shared (k0, k1 and k2). They ack what they receive at once, except a small share they keep
  back so that the ack timeout redelivers it. The consumers in `SILENT_CONSUMERS` (f0, k2) go
  silent now and then for longer than the cluster's consumer idle time
  (`QUIRE_EXCLUSIVE_CONSUMER_IDLE_MS`, `cluster.FAST_SETTINGS`), having acked what they hold:
  failover's standby f1 then takes over (and hands back when f0 returns), and key_shared's keys
  move to the others and back. Each silence is recorded (`History.silences`).
- Messages on keyed topics have keys (`LoadConfig.keys` of them); on plain topics they have
  none, which key_shared treats as one key (the empty one), all to one consumer at a time.
- A reader per topic pages from `earliest` to the end, tails it, and starts again from `earliest`
  every so often.
- On keyed topics a compaction is requested over the admin API every so often, and one keyed
  topic also has a compaction threshold, so that runs start by themselves too.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.chaos.client import CarefulClient, Unavailable
from bench.chaos.cluster import FAST_SETTINGS
from bench.chaos.history import Ack, Attempt, Delivery, History, Sent, Sighting, Silence

TENANT_NS = "public/default"
# (subscription name, type, consumer ids)
SUBSCRIPTIONS = (
    ("shared", "shared", ("c0", "c1")),
    ("exclusive", "exclusive", ("x0",)),
    ("failover", "failover", ("f0", "f1")),
    ("key_shared", "key_shared", ("k0", "k1", "k2")),
)
SILENT_CONSUMERS = frozenset({"f0", "k2"})  # they go silent for longer than the idle time now and then
CONSUMER_IDLE_S = int(FAST_SETTINGS["QUIRE_EXCLUSIVE_CONSUMER_IDLE_MS"]) / 1000
REQUEST_DEADLINE_S = 30.0
READ_PAGE = 500


@dataclass(frozen=True)
class LoadConfig:
    plain_topics: int = 2
    keyed_topics: int = 2
    producers_per_topic: int = 2
    fickle_producers_per_topic: int = 1  # they give up on a batch instead of retrying it
    fickle_deadline_s: float = 3.0
    max_batch: int = 8
    keys: int = 40
    tombstone_ratio: float = 0.05
    withhold_ratio: float = 0.01  # deliveries not acked, left to the ack timeout
    ack_timeout_ms: int = 5_000
    producer_pause_s: float = 0.03
    compaction_every_s: tuple[float, float] = (8.0, 20.0)
    threshold_bytes: int = 256 * 1024
    reread_every_s: float = 30.0
    # SILENT_CONSUMERS: a silence every so often, each 1.5 to 2.5 times the consumer idle time
    silent_every_s: tuple[float, float] = (10.0, 25.0)
    silent_s: tuple[float, float] = (1.5 * CONSUMER_IDLE_S, 2.5 * CONSUMER_IDLE_S)


def data_path(topic: str) -> str:
    return f"/v1/topics/{TENANT_NS}/{topic}"


def admin_path(topic: str) -> str:
    return f"/admin/v2/persistent/{TENANT_NS}/{topic}"


class Load:
    def __init__(self, client: CarefulClient, history: History, seed: int, config: LoadConfig) -> None:
        self.client = client
        self.history = history
        self.seed = seed
        self.config = config
        self.plain = [f"plain-{i}" for i in range(config.plain_topics)]
        self.keyed = [f"keyed-{i}" for i in range(config.keyed_topics)]
        self.topics = self.plain + self.keyed
        self.stop_producing = asyncio.Event()
        self.stop_consuming = asyncio.Event()
        self.give_up = asyncio.Event()  # producers stop retrying the batch they hold
        self.delivered: dict[tuple[str, str], set[str]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._producers: list[asyncio.Task[None]] = []

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(f"{self.seed}:{':'.join(map(str, parts))}")

    async def call(self, method: str, path: str, topic: str | None, **kw: Any) -> httpx.Response:
        deadline = time.monotonic() + kw.pop("deadline_s", REQUEST_DEADLINE_S)
        return await self.client.request(method, path, topic=topic, deadline=deadline, **kw)

    async def setup(self) -> None:
        """Topics, their subscriptions at earliest, and one keyed topic's compaction threshold."""
        for topic in self.topics:
            r = await self.call("PUT", admin_path(topic), topic, deadline_s=120)
            if r.status_code not in (204, 409):
                raise RuntimeError(f"creating {topic}: {r.status_code} {r.text}")
            for sub, kind, _consumers in SUBSCRIPTIONS:
                self.history.subscription_types[sub] = kind
                body = {
                    "initial_position": "earliest",
                    "type": kind,
                    "ack_timeout_ms": self.config.ack_timeout_ms,
                }
                r = await self.call("PUT", f"{data_path(topic)}/subscriptions/{sub}", topic, json=body)
                if r.status_code not in (200, 201):
                    raise RuntimeError(f"subscribing {sub} to {topic}: {r.status_code} {r.text}")
        if self.keyed:
            topic = self.keyed[0]
            path = f"{admin_path(topic)}/compactionThreshold"
            r = await self.call("POST", path, topic, json=self.config.threshold_bytes)
            if r.status_code != 204:
                raise RuntimeError(f"setting the compaction threshold of {topic}: {r.status_code} {r.text}")

    def start(self) -> None:
        spawn = self._tasks.append
        for topic in self.topics:
            for i in range(self.config.producers_per_topic):
                self._producers.append(asyncio.create_task(self._producer(topic, f"{topic}-p{i}")))
                spawn(self._producers[-1])
            for i in range(self.config.fickle_producers_per_topic):
                fickle = self._producer(topic, f"{topic}-fickle{i}", fickle=True)
                self._producers.append(asyncio.create_task(fickle))
                spawn(self._producers[-1])
            for sub, _kind, consumers in SUBSCRIPTIONS:
                self.delivered[topic, sub] = set()
                for consumer in consumers:
                    spawn(asyncio.create_task(self._consumer(topic, sub, consumer)))
            spawn(asyncio.create_task(self._reader(topic)))
        if self.keyed:
            spawn(asyncio.create_task(self._compaction_trigger()))

    async def stop(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        self.give_up.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def producers_done(self, timeout_s: float) -> int:
        """Stop new batches, wait for the batches in hand to be answered; how many were not."""
        self.stop_producing.set()
        _done, pending = await asyncio.wait(self._producers, timeout=timeout_s)
        self.give_up.set()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return len(pending)

    # --- producers ------------------------------------------------------------------------------

    def _message(self, topic: str, producer: str, seq: int, rng: random.Random) -> Sent:
        key: str | None = None
        value = f"{producer}/{seq}/{rng.getrandbits(32):08x}"
        if topic in self.keyed:
            key = f"k{rng.randrange(self.config.keys)}"
            if rng.random() < self.config.tombstone_ratio:
                value = ""
        return Sent(topic, producer, seq, key, value)

    async def _producer(self, topic: str, name: str, fickle: bool = False) -> None:
        rng = self._rng("producer", name)
        seq = 0
        while not self.stop_producing.is_set():
            batch = [
                self._message(topic, name, seq + i, rng) for i in range(rng.randint(1, self.config.max_batch))
            ]
            self.history.sent.extend(batch)
            if fickle:
                if not await self._send_once(topic, name, batch, self.config.fickle_deadline_s):
                    for m in batch:
                        m.abandoned = True
            else:
                await self._send_until_answered(topic, name, batch)
            seq += len(batch)
            await asyncio.sleep(rng.uniform(0, self.config.producer_pause_s))

    async def _send_until_answered(self, topic: str, name: str, batch: list[Sent]) -> None:
        while not self.give_up.is_set():
            if await self._send_once(topic, name, batch, REQUEST_DEADLINE_S):
                return
            await asyncio.sleep(1.0)

    async def _send_once(self, topic: str, name: str, batch: list[Sent], deadline_s: float) -> bool:
        """One request (the client follows redirects and retries 503s and dead brokers until the
        deadline); True when answered 200, and the batch then holds its answers."""
        messages = []
        for m in batch:
            one: dict[str, Any] = {"value": m.value, "sequence_id": m.seq}
            if m.key is not None:
                one["key"] = m.key
            messages.append(one)
        body = {"producer_name": name, "messages": messages}
        attempts = self.history.attempts
        first, count = batch[0].seq, len(batch)

        def observe(broker: str, status: int | None, error: str) -> None:
            attempts.append(Attempt(name, first, count, broker, status, error, time.time()))

        try:
            r = await self.call(
                "POST", f"{data_path(topic)}/messages", topic, json=body, observe=observe,
                deadline_s=deadline_s,
            )  # fmt: skip
        except Unavailable:
            return False
        if r.status_code == 200:
            now = time.time()
            for m, result in zip(batch, r.json()["results"], strict=True):
                m.message_id, m.duplicate, m.answered_at = result["message_id"], result["duplicate"], now
            return True
        self.history.note(f"produce {name} seq {first}: unexpected {r.status_code} {r.text[:200]}")
        return False

    # --- consumers ------------------------------------------------------------------------------

    async def _consumer(self, topic: str, sub: str, consumer: str) -> None:
        rng = self._rng("consumer", topic, sub, consumer)
        path = f"{data_path(topic)}/subscriptions/{sub}"
        params = {"max_messages": 100, "wait_ms": 500, "consumer_id": consumer}
        seen = self.delivered[topic, sub]
        silent = consumer in SILENT_CONSUMERS
        next_silence = time.monotonic() + rng.uniform(*self.config.silent_every_s)
        while not self.stop_consuming.is_set():
            if silent and time.monotonic() >= next_silence:
                await self._be_silent(topic, sub, consumer, rng)
                next_silence = time.monotonic() + rng.uniform(*self.config.silent_every_s)
            sent_at = time.time()
            try:
                r = await self.call("GET", f"{path}/messages", topic, params=params)
            except Unavailable:
                continue
            if r.status_code == 409:  # an exclusive subscription another consumer holds
                await asyncio.sleep(0.5)
                continue
            if r.status_code != 200:
                self.history.note(f"receive {topic}/{sub}: unexpected {r.status_code} {r.text[:200]}")
                await asyncio.sleep(1.0)
                continue
            received_at = time.time()
            to_ack = []
            for m in r.json()["messages"]:
                mid = m["message_id"]
                self.history.deliveries.append(
                    Delivery(
                        topic,
                        sub,
                        consumer,
                        mid,
                        m.get("producer_name"),
                        m.get("sequence_id"),
                        m.get("redelivery_count", 0),
                        sent_at,
                        received_at,
                        m.get("key"),
                    )
                )
                seen.add(mid)
                if rng.random() >= self.config.withhold_ratio:
                    to_ack.append(mid)
            if to_ack:
                await self._ack(topic, f"{path}/ack", sub, to_ack)

    async def _be_silent(self, topic: str, sub: str, consumer: str, rng: random.Random) -> None:
        """Ask for nothing for longer than the consumer idle time: the broker counts this
        consumer gone (its keys or its place as the active consumer go to the others) until it
        asks again. What it received is acked already (but for the share kept back)."""
        started = time.time()
        await asyncio.sleep(rng.uniform(*self.config.silent_s))
        self.history.silences.append(Silence(topic, sub, consumer, started, time.time()))

    async def _ack(self, topic: str, path: str, sub: str, ids: list[str]) -> None:
        while not self.stop_consuming.is_set():
            sent_at = time.time()
            try:
                r = await self.call("POST", path, topic, json={"message_ids": ids})
            except Unavailable:
                continue
            if r.status_code == 204:
                self.history.acks.append(Ack(topic, sub, tuple(ids), sent_at, time.time()))
                return
            self.history.note(f"ack {topic}/{sub}: unexpected {r.status_code} {r.text[:200]}")
            return

    # --- readers and compactions ----------------------------------------------------------------

    async def _reader(self, topic: str) -> None:
        start, pass_started = "earliest", time.monotonic()
        while not self.stop_consuming.is_set():
            params = {"start": start, "max_messages": READ_PAGE, "wait_ms": 500}
            try:
                r = await self.call("GET", f"{data_path(topic)}/messages", topic, params=params)
            except Unavailable:
                continue
            if r.status_code != 200:
                self.history.note(f"read {topic}: unexpected {r.status_code} {r.text[:200]}")
                await asyncio.sleep(1.0)
                continue
            body = r.json()
            for m in body["messages"]:
                seen = Sighting(m.get("producer_name"), m.get("sequence_id"), m.get("value"))
                self.history.sight(topic, m["message_id"], seen)
            if body["next"] is not None:
                start = body["next"]
            if time.monotonic() - pass_started > self.config.reread_every_s:
                start, pass_started = "earliest", time.monotonic()

    async def _compaction_trigger(self) -> None:
        rng = self._rng("compaction")
        while not self.stop_producing.is_set():
            await asyncio.sleep(rng.uniform(*self.config.compaction_every_s))
            topic = rng.choice(self.keyed)
            try:
                r = await self.call("PUT", f"{admin_path(topic)}/compaction", topic)
            except Unavailable:
                continue
            if r.status_code == 204:
                self.history.compactions_requested += 1
            elif r.status_code != 409:  # 409: a run is requested or running already
                self.history.note(f"compaction {topic}: unexpected {r.status_code} {r.text[:200]}")
