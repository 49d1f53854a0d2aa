"""Every error class answers over HTTP with the status (and title) pinned here.

Statuses follow each error's kind (common.errors). This table pins, per concrete error class, what
a client sees, through both ways the broker answers: the FastAPI exception handlers and
`domain_problem` (the raw-ASGI fast path's). A class added later fails
`test_every_error_class_is_pinned` until it gets a row, so its status is a decision made once.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.errors import domain_problem, install
from bookie.errors import ErrorCode
from common.errors import ErrorKind, QuireError

PACKAGES = ("app", "bookie", "common", "compactor", "managed_ledger", "topics")

# Exceptions used as a signal inside one module, never raised to a caller.
# Not errors of the service: the fast path's signal to hand a request to FastAPI, and the command
# line's report of a refusal the server already answered (its line for stderr).
# Nor are the security gate's signals: a refused token becomes the gate's own 401, and a key that
# cannot be used stops the process at start (settings) or `quire tokens` (exit 1).
NOT_ERRORS = {
    "app.fastpath._FallThrough",
    "app.admin_cli.base.Refused",
    "app.auth.tokens.TokenRefused",
    "app.auth.keys.KeyProblem",
    # Signals answered on their own wire, never raised to an HTTP caller: the Kafka listener's
    # (a refusal becomes a Kafka error code in its response, or the connection closes) and the
    # bookie handshake's (the client side turns it into BookieError NOT_AUTHENTICATED).
    "app.kafka_listener.admin.ConfigError",
    "app.kafka_listener.data._NotAllowed",
    "app.kafka_listener.server.CloseConnection",
    "app.kafka_listener.server._Stop",
    "app.kafka_listener.wire.WireError",
    "common.kafka_records.RecordBatchError",
    # The Pulsar listener's: a refusal becomes a ServerError in its answer, a bad frame closes
    # the connection.
    "app.pulsar_listener.errors.PulsarError",
    "app.pulsar_listener.errors.PulsarFrameError",
    "app.pulsar_listener.frames.ChecksumMismatch",
    "app.pulsar_listener.server.PulsarCloseConnection",
    "bookie.auth.AuthRefused",
    # Raised and translated inside their callers: a taken data directory becomes the engine's
    # BookieError or the cookie check's CookieMismatchError, a definition that does not parse
    # the schema registry's InvalidSchemaError.
    "bookie.storage.dir_lock.DirectoryInUseError",
    "topics.schema_compat.SchemaDefinitionError",
    # The web console's signals inside its page wrapper (app.console.web.page): an API refusal
    # becomes the page's answer showing its problem, a missing login the login page.
    "app.console.client.ApiRefused",
    "app.console.web.LoginRequired",
}

_500 = "Internal server error"
_MISSING = "Message not found"
_STORAGE = "Storage unavailable"
_METADATA = "Metadata store unavailable"

# class -> (constructor arguments, HTTP status, problem title)
PINNED: dict[str, tuple[tuple[Any, ...], int, str]] = {
    "common.errors.QuireError": (("boom",), 500, _500),
    "app.errors.ApiError": ((415, "not JSON"), 415, "Unsupported media type"),
    # bookie (a BookieError's status follows its code: see test_every_wire_code)
    "bookie.errors.BookieError": ((ErrorCode.TIMEOUT, "slow"), 503, _STORAGE),
    "bookie.errors.NoSuchLedgerError": ((7,), 404, _MISSING),
    "bookie.errors.NoSuchEntryError": ((7, 3), 404, _MISSING),
    "bookie.errors.FencedError": ((7,), 500, _500),
    "bookie.errors.ReadOnlyError": ((), 503, _STORAGE),
    "bookie.errors.ShortOfQuorumError": ((7, 3, 1, ("b:1",)), 503, _STORAGE),
    # a bookie's own start and registration, never an answer over HTTP; pinned all the same
    "bookie.errors.JournalDamagedError": (("00000001-0000.log", 100, 200), 500, _500),
    "bookie.errors.InstanceReplacedError": (("another instance",), 409, "Bookie instance replaced"),
    "bookie.errors.ProcessReplacedError": (("another process",), 409, "Bookie process replaced"),
    "bookie.errors.TwinBookieError": (("a copy",), 409, "Bookie id served by another process"),
    "bookie.registry.NotEnoughBookiesError": (("2 of 3",), 503, "Not enough bookies"),
    "bookie.cookie.CookieMismatchError": (("wiped",), 409, "Bookie cookie mismatch"),
    # auto-recovery's own signals; they stay in the recovery worker, never reach HTTP
    "bookie.rereplication.UnrecoverableEntryError": (("entry 3",), 503, "No replica of an entry"),
    "bookie.rereplication.ClaimLostError": (("taken",), 409, "Recovery claim lost"),
    "bookie.protocol.FrameError": (("frame CRC32C mismatch",), 500, _500),
    "bookie.storage.journal.DiskFullError": (("no space",), 503, "Bookie disk full"),
    "bookie.storage.index.IndexDamagedError": (("damaged slot",), 500, _500),
    # managed ledger
    "managed_ledger.errors.ManagedLedgerError": (("boom",), 500, _500),
    "managed_ledger.errors.EntryNotFoundError": (("gone",), 404, _MISSING),
    "managed_ledger.errors.ManagedLedgerFencedError": (("moved",), 503, "Topic moved; retry"),
    "managed_ledger.errors.ManagedLedgerClosedError": (("closed",), 503, "Topic closing; retry"),
    "managed_ledger.errors.ManagedLedgerWriteError": (("append failed",), 503, _STORAGE),
    "managed_ledger.errors.ManagedLedgerReadError": (("read failed",), 503, _STORAGE),
    "managed_ledger.errors.ManagedLedgerDeleteError": (("delete failed",), 503, _STORAGE),
    "managed_ledger.errors.ManagedLedgerMetadataError": (("store down",), 503, _METADATA),
    "managed_ledger.errors.ManagedLedgerTerminatedError": (("ended",), 409, "Topic terminated"),
    "managed_ledger.errors.CursorNotFoundError": (("no cursor",), 404, "Subscription not found"),
    "managed_ledger.errors.NoBookiesError": (("1 of 3",), 503, "Not enough bookies"),
    "managed_ledger.errors.SequenceInFlightError": (("p1", 7), 503, "Write in flight"),
    "managed_ledger.entry_format.EntryFormatError": (("bad magic",), 500, _500),
    "bookie.ledger_metadata.MetadataError": (("boom",), 500, _500),
    "bookie.ledger_metadata.BadVersionError": (("lost",), 409, "Concurrent update"),
    "bookie.ledger_metadata.NotFoundError": (("no row",), 404, "Not found"),
    "bookie.ledger_metadata.AlreadyExistsError": (("row",), 409, "Already exists"),
    "managed_ledger.metadata.api.NotEmptyError": (("has topics",), 409, "Not empty"),
    "bookie.ledger_metadata.MetadataUnavailableError": (("db down",), 503, _METADATA),
    "managed_ledger.metadata.api.SchemaBehindError": (("migrate",), 503, "Metadata schema behind"),
    "managed_ledger.metadata.sql._PolicyRace": (("raced",), 409, "Concurrent update"),
    # topics
    "topics.errors.TopicsError": (("boom",), 500, _500),
    "topics.errors.InvalidArgumentError": (("bad",), 422, "Invalid argument"),
    "topics.errors.InvalidNameError": (("a b", "has a space"), 422, "Invalid name"),
    "topics.errors.InvalidMessageIdError": (("1:x",), 422, "Invalid message id"),
    "topics.errors.InvalidPolicyError": (("retention", "negative"), 422, "Invalid policy"),
    # The one status that changed on purpose: a wait over the cap was 422 in the domain.
    "topics.errors.WaitTooLongError": ((5_000, 1_000), 400, "Wait too long"),
    "topics.errors.TooManyMessagesRequestedError": ((20_000, 10_000), 400, "Too many messages requested"),
    "topics.errors.TenantNotFoundError": (("t",), 404, "Tenant not found"),
    "topics.errors.NamespaceNotFoundError": (("t/n",), 404, "Namespace not found"),
    "topics.errors.TopicNotFoundError": (("t/n/x",), 404, "Topic not found"),
    "topics.errors.SchemaNotFoundError": (("t/n/x", 2), 404, "Schema not found"),
    "topics.errors.InvalidSchemaError": (("not an Avro schema",), 422, "Invalid schema"),
    "topics.errors.IncompatibleSchemaError": (
        ("t/n/x", "FULL", "field a removed"),
        409,
        "Incompatible schema",
    ),
    "topics.errors.SubscriptionNotFoundError": (("t/n/x", "s"), 404, "Subscription not found"),
    "topics.errors.MessageNotFoundError": (("t/n/x", "1:2:0"), 404, _MISSING),
    "topics.errors.TenantExistsError": (("t",), 409, "Tenant already exists"),
    "topics.errors.NamespaceExistsError": (("t/n",), 409, "Namespace already exists"),
    "topics.errors.TopicExistsError": (("t/n/x",), 409, "Topic already exists"),
    "topics.errors.TenantNotEmptyError": (("t",), 409, "Tenant not empty"),
    "topics.errors.NamespaceNotEmptyError": (("t/n",), 409, "Namespace not empty"),
    "topics.errors.TopicBusyError": (("t/n/x", ["s"]), 409, "Topic has subscriptions"),
    "topics.errors.GroupNotFoundError": (("g",), 404, "Group not found"),
    "topics.errors.GroupNotEmptyError": (("g", 2), 409, "Group not empty"),
    "topics.errors.ConsumerBusyError": (("t/n/x", "s", "c1"), 409, "Exclusive subscription busy"),
    "topics.errors.ConsumerAssignError": (
        ("consumer c2: ranges overlap c1's",),
        409,
        "Key_shared hash ranges refused",
    ),
    "topics.errors.ConsumerIdRequiredError": (("t/n/x", "s", "failover"), 422, "Consumer id required"),
    "topics.errors.SubscriptionExistsError": (("t/n/x", "s"), 409, "Subscription already exists"),
    "topics.errors.PartitionCountError": (("t/n/x has 4",), 409, "Partition count cannot change so"),
    "topics.errors.DeadLetterForwardError": (("down",), 503, "Dead-letter topic unavailable"),
    "topics.errors.CompactionConflictError": (("t/n/x",), 409, "Compaction already running"),
    "topics.errors.MessageTooLargeError": ((0, 2_000, 1_000), 413, "Message too large"),
    "topics.errors.BatchTooLargeError": (
        ("bytes", 9_000, 5_000, "max_batch_size_bytes"),
        413,
        "Batch too large",
    ),
    "topics.errors.BacklogQuotaExceededError": (
        ("t/n/x", "destination_storage", "producer_exception", 1_000, "bytes"),
        429,
        "Backlog quota exceeded",
    ),
    "topics.errors.StorageUnavailableError": (("down",), 503, _STORAGE),
    "topics.errors.WriteInFlightError": (("t/n/x", "p1", 7), 503, "Write in flight"),
    "topics.errors.NotOwnerError": (("t/n/x", "b:1", "http://b:1"), 307, "Topic owned by another broker"),
    "topics.errors.OwnershipUnavailableError": (("renewing",), 503, "Ownership unavailable"),
    "topics.errors.TopicTerminatedError": (("t/n/x",), 409, "Topic terminated"),
    "topics.errors.MessageIdBeyondEndError": (("t/n/x", "9:9:0", "3:4:0"), 422, "Message id beyond the end"),
    # the Kafka listener's cases (answered as Kafka error codes there; pinned for HTTP all the same)
    "topics.errors.UnknownPartitionError": (("t/n/x", 3), 404, "Unknown partition"),
    "topics.errors.OffsetOutOfRangeError": (("t/n/x", 0, 99, 0, 10), 422, "Offset out of range"),
    "topics.errors.KafkaSequenceError": (("gap", "p1", 7), 409, "Producer sequence out of turn"),
    "topics.compacted.CompactedViewError": (("not compacted",), 500, _500),
    # compactor
    "compactor.errors.CompactionError": (("boom",), 500, _500),
    "compactor.errors.CompactionRunConflictError": (("running",), 409, "Compaction already running"),
    "compactor.errors.LeaseLostError": (("lapsed",), 409, "Compaction lease lost"),
    "compactor.errors.SparkJobError": (("task failed",), 503, "Service unavailable"),
    "compactor.errors.CompactionTopicNotFoundError": (("no ml",), 404, "Topic not found"),
}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in Quire's packages (importing each module once)."""
    found: dict[str, type[BaseException]] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        modules = [package_name] + [
            info.name for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}.")
        ]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == module_name:
                    found[_qualified(cls)] = cls
    return found


CLASSES = _exception_classes()


def _build(name: str) -> BaseException:
    args = PINNED[name][0]
    return CLASSES[name](*args)


def test_every_error_class_is_pinned() -> None:
    errors = set(CLASSES) - NOT_ERRORS
    assert sorted(errors - set(PINNED)) == [], "give each new error class a kind and a row here"
    assert sorted(set(PINNED) - errors) == [], "a pinned class no longer exists"


def test_every_error_class_is_a_quire_error_with_a_kind() -> None:
    for name in set(CLASSES) - NOT_ERRORS:
        cls = CLASSES[name]
        assert issubclass(cls, QuireError), name
        assert isinstance(cls.kind, ErrorKind), name


def test_no_two_error_classes_share_a_name() -> None:
    names = [cls.__name__ for cls in CLASSES.values()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install(app)

    @app.get("/raise/{name}")
    async def raise_it(name: str) -> None:
        raise _build(name)

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://quire") as client:
        yield client


@pytest.mark.parametrize("name", sorted(PINNED))
async def test_status_and_title_through_the_fastapi_handlers(http: httpx.AsyncClient, name: str) -> None:
    _, status, title = PINNED[name]
    response = await http.get(f"/raise/{name}")
    assert (response.status_code, response.json()["title"]) == (status, title)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == status


@pytest.mark.parametrize("name", sorted(PINNED))
def test_status_and_title_through_domain_problem(name: str) -> None:
    """The fast path answers through `domain_problem`; None means its unexpected-error 500."""
    _, status, title = PINNED[name]
    response = domain_problem(_build(name))
    if status == 500:
        assert response is None
    else:
        assert response is not None
        assert response.status_code == status
        assert f'"title":"{title}"'.encode() in bytes(response.body)


def test_a_domain_title_wins_over_the_kinds_default() -> None:
    response = domain_problem(_build("topics.errors.TopicBusyError"))
    assert response is not None
    assert b'"title":"Topic has subscriptions"' in bytes(response.body)
    assert b'"type":"https://quire.dev/problems/topic-busy"' in bytes(response.body)


def test_a_backlog_quota_refusal_is_429_with_retry_after_and_its_quota() -> None:
    response = domain_problem(_build("topics.errors.BacklogQuotaExceededError"))
    assert response is not None
    assert response.headers["Retry-After"] == "1"
    body = bytes(response.body)
    assert b'"type":"https://quire.dev/problems/backlog-quota-exceeded"' in body
    assert b'"quota_type":"destination_storage"' in body and b'"limit":1000' in body
