"""The Pulsar binary-protocol listener: unmodified Pulsar clients (`pulsar-client`, the C++ core
under it, Java, Go) produce to and consume from Quire topics.

Named `pulsar_listener`, not `pulsar`, because `pulsar` is pulsar-client's module.

- `proto`: the protocol's messages, generated from `proto/pulsar_api.proto` (`make pulsar-proto`).
- `frames`: frame sizes, the command, the 0x0e01 magic and CRC32C checksum of a message's
  metadata and payload; limits on frame size.
- `entries`: a Pulsar message (or batch) to Quire messages and back.
- `publish`: the one topic call a SEND becomes, behind a narrow seam.
- `server`: the asyncio TCP server and one `Connection` per client, handlers keyed by command.
- `producers`, `consumers`: the PRODUCER/SEND and SUBSCRIBE/FLOW/ACK handling.
- `listener`: all of it on one server, as a broker starts it.

This package has no FastAPI.
"""
