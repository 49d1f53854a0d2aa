"""The role matrix: every operation of the OpenAPI spec, called by every kind of caller, answers
exactly as the permissions say.

The table below is written by hand from Pulsar's rules (docs/rest-api.md#security), separately
from app/auth/policy.py, and must name every operation of the spec: a new route without a row
fails here. Callers: anonymous (401 unless the operation is open), a produce-only role, a
consume-only role, the admin of another tenant, the tenant's admin, and a super-user; a caller
the table allows never gets 401 or 403 (and no 500), a caller it does not allow always gets 403.
The hot data-plane routes run once through the raw fast path and once through FastAPI.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.openapi_export import spec
from tests.api.auth_support import ROLES, SUPER_USER, Secured, bearer, secured, security

PRODUCE = {"producer", "acme-admin", SUPER_USER}
CONSUME = {"consumer", "acme-admin", SUPER_USER}
LOOKUP = PRODUCE | CONSUME
TENANT_ADMIN = {"acme-admin", SUPER_USER}
SUPER = {SUPER_USER}
OPEN = {"anonymous", *ROLES}

_TABLE = {
    "produce": PRODUCE,
    # a reader is a consumer without a subscription; subscriptions are the consumer's
    "readMessages getMessage getLastMessageId createSubscription deleteSubscription receive "
    "ackMessages nackMessages seekSubscription listSubscriptions adminCreateSubscription "
    "adminDeleteSubscription resetCursor resetCursorToMessageId skipMessages skipAllMessages "
    "expireMessages expireMessagesAllSubscriptions peekMessage examineMessage": CONSUME,
    "lookupTopic getPartitions listTopics getNamespace getTopicStats getPartitionedStats "
    "getInternalStats getSchema getSchemaVersion getAllSchemas": LOOKUP,
    "createTopic deleteTopic createPartitionedTopic updatePartitionedTopic unloadTopic "
    "triggerCompaction getCompactionStatus terminateTopic truncateTopic truncateTopicBefore "
    "getRetention setRetention removeRetention getRolloverPolicy setRolloverPolicy "
    "removeRolloverPolicy getCompactionThreshold setCompactionThreshold removeCompactionThreshold "
    "getCompactionPolicy setCompactionPolicy removeCompactionPolicy "
    "getDeduplicationEnabled setDeduplicationEnabled removeDeduplicationEnabled getMessageTTL "
    "setMessageTTL removeMessageTTL getBacklogQuotaMap setBacklogQuota removeBacklogQuota "
    "getTenant listNamespaces createNamespace deleteNamespace getNamespaceRetention "
    "setNamespaceRetention removeNamespaceRetention getNamespaceRolloverPolicy "
    "setNamespaceRolloverPolicy removeNamespaceRolloverPolicy getNamespaceCompactionThreshold "
    "setNamespaceCompactionThreshold removeNamespaceCompactionThreshold getNamespaceCompactionPolicy "
    "setNamespaceCompactionPolicy removeNamespaceCompactionPolicy getNamespaceDeduplication "
    "setNamespaceDeduplication removeNamespaceDeduplication getNamespaceMessageTTL "
    "setNamespaceMessageTTL removeNamespaceMessageTTL getNamespaceBacklogQuotaMap "
    "setNamespaceBacklogQuota removeNamespaceBacklogQuota getPermissions grantPermission "
    "revokePermission postSchema deleteSchema getSchemaCompatibilityStrategy "
    "setSchemaCompatibilityStrategy": TENANT_ADMIN,
    "listTenants createTenant updateTenant deleteTenant listBrokers listBookies "
    "listUnderReplicatedLedgers decommissionBookie cancelBookieDecommission listKafkaGroups "
    "getKafkaGroup deleteKafkaGroup": SUPER,
    "healthz readyz metrics": OPEN,
}
ALLOWED: dict[str, set[str]] = {op: roles for ops, roles in _TABLE.items() for op in ops.split()}

# Path parameters: the tenant and namespace are the ones the roles are about.
PARAMS = {
    "tenant": "acme",
    "namespace": "ns",
    "topic": "t",
    "subscription": "sub",
    "message_id": "1:0:0",
    "role": "someone",
    "bookieId": "127.0.0.1:3181",
    "group": "g",
    "n": "1",
    "seconds": "60",
    "timestamp": "0",
    "version": "0",
}


def operations() -> list[tuple[str, str, str, set[str]]]:
    """(operation id, method, path, tags) of every operation the spec lists."""
    out = []
    for path, methods in spec()["paths"].items():
        for method, operation in methods.items():
            out.append((operation["operationId"], method.upper(), path, set(operation["tags"])))
    return out


def test_the_table_names_exactly_the_operations_of_the_spec() -> None:
    ids = {op for op, *_ in operations()}
    assert sorted(ids - ALLOWED.keys()) == [], "operations without a row in the matrix"
    assert sorted(ALLOWED.keys() - ids) == [], "rows of operations the spec no longer has"


def test_the_spec_says_what_each_operation_needs() -> None:
    for path, methods in spec()["paths"].items():
        for operation in methods.values():
            # /metrics is open by default, and for super-users with QUIRE_METRICS_REQUIRE_TOKEN
            if ALLOWED[operation["operationId"]] == OPEN and path != "/metrics":
                assert operation["security"] == [], path
            else:
                assert {"401", "403"} <= operation["responses"].keys(), path
                assert operation["x-quire-permission"], path


def _url(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PARAMS[m.group(1)], path)


async def _call(s: Secured, method: str, path: str, caller: str) -> Any:
    headers = {} if caller == "anonymous" else bearer(caller)
    return await s.client.request(method, _url(path), headers=headers)


def _check(op: str, caller: str, status: int, body: bytes) -> None:
    if caller in ALLOWED[op]:
        assert status not in (401, 403, 500), f"{op} as {caller}: {status} {body[:300]!r}"
    elif caller == "anonymous":
        assert status == 401, f"{op} as anonymous: {status} {body[:300]!r}"
    else:
        assert status == 403, f"{op} as {caller}: {status} {body[:300]!r}"


@pytest.mark.parametrize("fast_path", [True, False])
async def test_every_operation_answers_every_caller_as_the_permissions_say(fast_path: bool) -> None:
    callers = ["anonymous", *ROLES]
    async with secured() as s:
        s.app.state.fast_path.enabled = fast_path
        for op, method, path, tags in operations():
            if not fast_path and "data" not in tags:
                continue  # only the data plane has two entry points
            # the refused first, so the allowed ones' side effects (a deleted topic) change nothing
            for caller in sorted(callers, key=lambda c: c in ALLOWED[op]):
                response = await _call(s, method, path, caller)
                _check(op, caller, response.status_code, response.content)


async def test_metrics_with_a_token_required_is_for_super_users() -> None:
    async with secured(security(metrics_require_token=True)) as s:
        assert (await _call(s, "GET", "/metrics", "anonymous")).status_code == 401
        for role in ROLES:
            expected = 200 if role == SUPER_USER else 403
            assert (await _call(s, "GET", "/metrics", role)).status_code == expected, role
        assert (await _call(s, "GET", "/healthz", "anonymous")).status_code == 200


async def test_authentication_without_authorization_lets_any_valid_token_in() -> None:
    async with secured(security(authorization=False)) as s:
        for op, method, path, _ in operations():
            if ALLOWED[op] != OPEN:
                assert (await _call(s, method, path, "anonymous")).status_code == 401, op
                response = await _call(s, method, path, "producer")
                assert response.status_code not in (401, 403, 500), (op, response.status_code)
