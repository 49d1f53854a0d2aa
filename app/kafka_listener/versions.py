"""The Kafka API versions the listener advertises in its ApiVersions response, and why.

Every client studied (librdkafka 2.x behind kcat and confluent-kafka, kafka-python 3.x,
aiokafka 0.14, kafkajs 2.2) uses min(its own max, the broker's max) for each API, so a broker
whose max is no higher than any client's max gets exactly one version per API from all of them:
one wire layout to serve per API. The maxima below are therefore the lowest client maxima:

- aiokafka 0.14 is the most limited client: Produce 7, Metadata 5, ListOffsets 3, OffsetCommit 3,
  FindCoordinator 1, Heartbeat 1, LeaveGroup 1, InitProducerId 0 (it refuses a broker whose range
  holds none of its versions). None of the versions below is flexible except ApiVersions 3.
- librdkafka before 2.11.1 (Debian's kcat 1.7.1 has 2.0.2) turns features on only if single
  versions lie in the advertised range: Produce 0/3/7, Fetch 4/10, ListOffsets 1,
  FindCoordinator 0, InitProducerId 0, ApiVersions 0. The minima below keep all of them in.
- Produce is advertised from 0 although only 3-7 are served (the KAFKA-18659 quirk, as Kafka 4
  does): librdkafka before 2.11.1 switches compression off unless Produce 0 is advertised. A
  Produce v0-2 request is answered with UNSUPPORTED_VERSION by the server itself.
- CreateTopics starts at 2, DeleteTopics and DescribeConfigs at 1, as in Kafka 4 (KIP-896): the
  codec (kio) has no older layouts, and every client picks the max (3, 1, 1) anyway.
- Staying below Metadata 7, ListOffsets 4, Fetch 9 and OffsetCommit 6 keeps leader epochs out of
  the protocol, so librdkafka skips its offset validation by epoch.

kafka-python infers a "broker version" from the table: Fetch 11 in range and Produce 8 not gives
(2, 3), which turns on magic 2 and idempotence.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Final


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36


# (min, max) advertised per API key.
ADVERTISED: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 7),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 3),
    ApiKey.METADATA: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 3),
    ApiKey.OFFSET_FETCH: (1, 3),
    ApiKey.FIND_COORDINATOR: (0, 1),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 1),
    ApiKey.LEAVE_GROUP: (0, 1),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 3),
    ApiKey.DELETE_TOPICS: (1, 1),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.DESCRIBE_CONFIGS: (1, 1),
    # Only with authentication on (docs/kafka.md#security). Every client studied sends v1 and
    # then SaslAuthenticate; v0 is advertised because librdkafka before 2.11.1 checks for it
    # alone. A v0 client would send its token as a raw frame outside Kafka's framing
    # (pre-KIP-152), which is not served: its connection closes.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 1),
}

# Advertised but answered with UNSUPPORTED_VERSION below this version (see the module docstring).
PRODUCE_MIN_SERVED: Final = 3


def served_range(api_key: int) -> tuple[int, int] | None:
    """The versions of `api_key` whose requests reach a handler, or None for an API not in the
    table. Produce's starts at 3, the others are their advertised range."""
    try:
        low, high = ADVERTISED[ApiKey(api_key)]
    except ValueError:
        return None
    if api_key == ApiKey.PRODUCE:
        low = PRODUCE_MIN_SERVED
    return low, high


def advertised(api_keys: Iterable[int]) -> list[tuple[int, int, int]]:
    """(api_key, min, max) rows for ApiVersions, in key order, for the given served keys (and
    always ApiVersions itself)."""
    keys = {ApiKey(key) for key in api_keys} | {ApiKey.API_VERSIONS}
    return [(int(key), *ADVERTISED[key]) for key in sorted(keys)]
