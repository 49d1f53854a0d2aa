"""The Kafka protocol listener: unmodified Kafka clients produce to and consume from Quire topics.

Named `kafka_listener`, not `kafka`, because `kafka` is kafka-python's module.

- `versions`: the API versions the listener advertises in ApiVersions, and why.
- `errors`: the Kafka error codes the listener answers with.
- `wire`: request headers, request bodies and response frames (kio does the encoding).
- `server`: the asyncio TCP server; handlers for each API are plugged in by key.
- `records`: the record batch v2 codec (validation, base-offset patching, decoding, encoding).

This package has no FastAPI and no storage: it turns bytes into kio request objects and kio
response objects into bytes, and leaves what a request means to its handler.
"""
