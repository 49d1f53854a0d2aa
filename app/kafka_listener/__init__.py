"""The Kafka protocol listener: unmodified Kafka clients produce to and consume from Quire topics.

Named `kafka_listener`, not `kafka`, because `kafka` is kafka-python's module.

- `versions`: the API versions the listener advertises in ApiVersions, and why.
- `errors`: the Kafka error codes the listener answers with.
- `wire`: request headers, request bodies and response frames (kio does the encoding).
- `server`: the asyncio TCP server; handlers for each API are plugged in by key.
- `data`, `admin`: the data-plane and admin handlers over topics; `groups*`: the group
  coordinator; `listener`: all of them on one server. The record batch codec is
  `common.kafka_records`.

This package has no FastAPI.
"""
