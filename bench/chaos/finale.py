"""After the load: read every topic back through the API, let the consumers drain, compact each
keyed topic a last time and read its compacted view; and find in the brokers' logs the leases
they lost without being told to (a busy machine can starve a heartbeat), which the checker
counts as faults."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime
from typing import Any

from bench.chaos.cluster import Cluster
from bench.chaos.history import Fault
from bench.chaos.load import Load, admin_path, data_path

PAGE = 1000
MAX_SKIPS = 50  # unreadable entries read around per topic, at most
# The failing read's detail: "L:a..b: NO_SUCH_ENTRY: ledger L entry E" or "L:a..b: NO_SUCH_LEDGER"
_FAILED_RANGE = re.compile(r"(\d+):(\d+)\.\.(\d+): NO_SUCH_(?:LEDGER|ENTRY)(?:: ledger \d+ entry (\d+))?")
FENCED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) WARNING \S+: managed ledger (\S+) fenced")
LOST_SESSION = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) WARNING quire\.ownership: broker \S+ lost session"
)


class Finale:
    def __init__(self, load: Load, timeout_s: float, compaction_timeout_s: float) -> None:
        self.load = load
        self.timeout_s = timeout_s
        self.compaction_timeout_s = compaction_timeout_s

    async def read_all(self, topic: str, compacted: bool) -> list[dict[str, Any]]:
        """Every message of `topic` from earliest, page by page, to the last message id.

        An entry that cannot be read is recorded in `history.unreadable` (not raised) and read
        around: after a page fails, the same start is read one message at a time until the
        failing entry is found, and reading goes on from the entry after it."""
        path = data_path(topic)
        flag = "true" if compacted else "false"
        what = f"{'the compacted view of ' if compacted else ''}{topic}"
        r = await self.load.call("GET", f"{path}/last-message-id", topic, params={"read_compacted": flag})
        if r.status_code != 200:
            raise RuntimeError(f"last message id of {what}: {r.status_code} {r.text}")
        last = r.json()["message_id"]
        out: list[dict[str, Any]] = []
        start, page, skips = "earliest", PAGE, 0
        while True:
            params = {"start": start, "max_messages": page, "read_compacted": flag}
            r = await self.load.call(
                "GET", f"{path}/messages", topic, params=params, deadline_s=self.timeout_s
            )
            if r.status_code == 200:
                body = r.json()
                out.extend(body["messages"])
                if not body["messages"] or body["next"] is None:
                    break
                start = body["next"]
                continue
            if page > 1:
                page = 1  # find the entry that fails
                continue
            skip_to = _entry_after(r.text)
            seen = out[-1]["message_id"] if out else start
            note = f"{what}: the entry after {seen} cannot be read: {r.status_code} {r.text[:300]}"
            self.load.history.unreadable.append((topic, f"{note}; read on from {skip_to}"))
            if skip_to is None or skips == MAX_SKIPS:
                return out
            start, page, skips = skip_to, PAGE, skips + 1
        end = out[-1]["message_id"] if out else None
        if end != last:
            self.load.history.unreadable.append(
                (topic, f"{what} from earliest ended at {end}, last-message-id is {last}")
            )
        return out

    async def read_logs(self) -> dict[str, list[dict[str, Any]]]:
        return {topic: await self.read_all(topic, compacted=False) for topic in self.load.topics}

    async def drain(self, logs: dict[str, list[dict[str, Any]]]) -> int:
        """Until every subscription has delivered every stored message (bounded); how many not."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            missing = sum(
                sum(1 for m in logs[topic] if m["message_id"] not in seen)
                for (topic, _sub), seen in self.load.delivered.items()
            )
            if missing == 0 or time.monotonic() > deadline:
                return missing
            await asyncio.sleep(0.5)

    async def _status(self, topic: str) -> str:
        r = await self.load.call("GET", f"{admin_path(topic)}/compaction", topic)
        if r.status_code != 200:
            raise RuntimeError(f"compaction status of {topic}: {r.status_code} {r.text}")
        return str(r.json()["status"])

    async def _settled(self, topic: str, deadline: float) -> str:
        status = await self._status(topic)
        while status == "RUNNING" and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            status = await self._status(topic)
        return status

    async def compact(self, topic: str) -> str:
        """Request a run (after any run in progress) and wait for its result, up to 3 tries."""
        deadline = time.monotonic() + self.compaction_timeout_s
        status = "not requested"
        for _try in range(3):
            while time.monotonic() < deadline:
                r = await self.load.call("PUT", f"{admin_path(topic)}/compaction", topic)
                if r.status_code == 204:
                    break
                if r.status_code != 409:
                    raise RuntimeError(f"compacting {topic}: {r.status_code} {r.text}")
                await self._settled(topic, deadline)
            self.load.history.compactions_requested += 1
            status = await self._settled(topic, deadline)
            if status == "SUCCESS":
                return status
        return status

    async def compacted_views(self) -> dict[str, list[dict[str, Any]]]:
        views = {}
        for topic in self.load.keyed:
            status = await self.compact(topic)
            if status != "SUCCESS":
                self.load.history.note(
                    f"the final compaction of {topic} ended {status}; its view is not checked"
                )
                continue
            views[topic] = await self.read_all(topic, compacted=True)
        return views


def _entry_after(problem: str) -> str | None:
    """The inclusive start just past the entry a failed one-message read names, if it names one."""
    match = _FAILED_RANGE.search(problem)
    if match is None:
        return None
    ledger, first, _last, entry = match.groups()
    return f"{ledger}:{int(entry if entry is not None else first) + 1}:0"


def lease_losses(cluster: Cluster, lease_ms: int) -> list[Fault]:
    """Each 'lost session' a broker logged, as a fault spanning the lease before it."""
    found = []
    for broker in cluster.brokers:
        if not broker.log.exists():
            continue
        for line in broker.log.read_text(errors="replace").splitlines():
            match = LOST_SESSION.match(line)
            if match:
                at = _log_time(match.group(1))
                found.append(
                    Fault("lease-lost", broker.name, at - lease_ms / 1000 - 1, at + 1, "in its log", False)
                )
    return found


def _log_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def topic_fences(cluster: Cluster, topics: list[str]) -> list[Fault]:
    """Each time a broker logged a managed ledger of one of `topics` fenced (another owner took
    it, its lease lapsed, or auto-recovery fenced its open ledger), as a fault whose target is the
    topic: the broker then reopens the topic, and its subscriptions start afresh."""
    found = []
    for broker in cluster.brokers:
        if not broker.log.exists():
            continue
        for line in broker.log.read_text(errors="replace").splitlines():
            match = FENCED.match(line)
            if match is None:
                continue
            topic = match.group(2).rsplit("/", 1)[-1]
            if topic in topics:
                at = _log_time(match.group(1))
                found.append(Fault("ledger-fenced", topic, at, at, f"in the log of {broker.name}", False))
    return found
