"""The advertised version table against the codec (kio) and the clients' own code, and the
error codes against kio's table."""

from __future__ import annotations

import pytest
from aiokafka.protocol import (
    admin,
    commit,
    coordination,
    fetch,
    group,
    metadata,
    offset,
    produce,
    transaction,
)
from kio.schema.errors import ErrorCode as KioErrorCode

from app.kafka_listener import wire
from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.versions import ADVERTISED, PRODUCE_MIN_SERVED, ApiKey, advertised, served_range

AIOKAFKA_REQUESTS = {
    ApiKey.PRODUCE: produce.ProduceRequest,
    ApiKey.FETCH: fetch.FetchRequest,
    ApiKey.LIST_OFFSETS: offset.OffsetRequest,
    ApiKey.METADATA: metadata.MetadataRequest,
    ApiKey.OFFSET_COMMIT: commit.OffsetCommitRequest,
    ApiKey.OFFSET_FETCH: commit.OffsetFetchRequest,
    ApiKey.FIND_COORDINATOR: coordination.FindCoordinatorRequest,
    ApiKey.JOIN_GROUP: group.JoinGroupRequest,
    ApiKey.HEARTBEAT: group.HeartbeatRequest,
    ApiKey.LEAVE_GROUP: group.LeaveGroupRequest,
    ApiKey.SYNC_GROUP: group.SyncGroupRequest,
    ApiKey.API_VERSIONS: admin.ApiVersionRequest,
    ApiKey.CREATE_TOPICS: admin.CreateTopicsRequest,
    ApiKey.DELETE_TOPICS: admin.DeleteTopicsRequest,
    ApiKey.DELETE_RECORDS: admin.DeleteRecordsRequest,
    ApiKey.INIT_PRODUCER_ID: transaction.InitProducerIdRequest,
    ApiKey.DESCRIBE_CONFIGS: admin.DescribeConfigsRequest,
    ApiKey.SASL_HANDSHAKE: admin.SaslHandShakeRequest,
    ApiKey.SASL_AUTHENTICATE: admin.SaslAuthenticateRequest,
}

# librdkafka before 2.11.1 turns a feature on only if these single versions are advertised.
LIBRDKAFKA_SINGLE_VERSIONS = [
    (ApiKey.PRODUCE, 0),
    (ApiKey.PRODUCE, 3),
    (ApiKey.PRODUCE, 7),
    (ApiKey.FETCH, 4),
    (ApiKey.FETCH, 10),
    (ApiKey.LIST_OFFSETS, 1),
    (ApiKey.FIND_COORDINATOR, 0),
    (ApiKey.INIT_PRODUCER_ID, 0),
    (ApiKey.API_VERSIONS, 0),
    (ApiKey.OFFSET_COMMIT, 2),
    (ApiKey.OFFSET_FETCH, 1),
]


@pytest.mark.parametrize("key", list(ADVERTISED))
def test_every_served_version_has_a_kio_layout(key: ApiKey) -> None:
    served = served_range(key)
    assert served is not None
    for version in range(served[0], served[1] + 1):
        assert wire.request_type(key, version) is not None, (key, version)
        assert wire.response_type(key, version) is not None, (key, version)


def test_only_api_versions_3_is_flexible() -> None:
    flexible = [
        (key, version)
        for key, (low, high) in ADVERTISED.items()
        for version in range(max(low, served_range(key)[0]), high + 1)  # type: ignore[index]
        if wire.request_type(key, version).__flexible__  # type: ignore[union-attr]
    ]
    assert flexible == [(ApiKey.API_VERSIONS, 3)]


def test_produce_is_advertised_from_0_but_served_from_3() -> None:
    assert ADVERTISED[ApiKey.PRODUCE] == (0, 7)
    assert served_range(ApiKey.PRODUCE) == (PRODUCE_MIN_SERVED, 7) == (3, 7)
    assert served_range(15) is None and served_range(999) is None


@pytest.mark.parametrize("key", list(ADVERTISED))
def test_aiokafka_finds_a_version_and_uses_our_max(key: ApiKey) -> None:
    """aiokafka takes the highest version it implements inside the advertised range (and
    refuses a broker with none): it must find one, and it is our max except where aiokafka has
    no such version (InitProducerId: it has only 0; ApiVersions: up to 2, and it sends 0)."""
    low, high = ADVERTISED[key]
    versions = [cls.API_VERSION for cls in AIOKAFKA_REQUESTS[key]._CLASSES]
    used = max(v for v in versions if low <= v <= high)
    assert used == high or (key, used) in {(ApiKey.INIT_PRODUCER_ID, 0), (ApiKey.API_VERSIONS, 2)}
    if key == ApiKey.PRODUCE:
        assert used >= PRODUCE_MIN_SERVED


@pytest.mark.parametrize(("key", "version"), LIBRDKAFKA_SINGLE_VERSIONS)
def test_old_librdkafka_feature_versions_are_advertised(key: ApiKey, version: int) -> None:
    low, high = ADVERTISED[key]
    assert low <= version <= high


def test_advertised_rows_cover_the_served_keys_and_api_versions() -> None:
    assert advertised([]) == [(18, 0, 3)]
    assert advertised([ApiKey.FETCH, ApiKey.PRODUCE]) == [(0, 0, 7), (1, 4, 11), (18, 0, 3)]


def test_error_codes_match_kio() -> None:
    for code in ErrorCode:
        assert code.kio.value == code.value
        assert code.kio.name == code.name.lower()
        assert isinstance(code.kio, KioErrorCode)
