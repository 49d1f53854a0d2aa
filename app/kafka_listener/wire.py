"""Kafka request and response frames, encoded and decoded with kio.

Every frame is an int32 size (of what follows) and then, big-endian:

    request:  api_key int16 | api_version int16 | correlation_id int32 | client_id nullable string
              (int16 length, -1 = null) | [header v2 only: tagged fields] | body
    response: correlation_id int32 | [header v1 only: tagged fields, 0x00 when empty] | body

A request uses header v2 when its (api_key, api_version) is flexible (compact strings and arrays,
tagged fields), else v1; its response uses header v1, resp. v0 -- except ApiVersions, whose
response header is always v0 so that a client can read the error of a version it sent too high
(KIP-511). kio carries the header version of each payload class (`__header_schema__`), so the
rule is kio's.

The records of a Produce request come out of kio as `bytes` (one copy of the frame's slice) and
the `records` of a Fetch response go into the frame as given, with no re-encoding: a handler may
pass any `bytes`. Responses are written as a list of chunks and joined once, so a large
`records` field is copied once into the frame.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import types
import typing
import uuid
from typing import Any, cast

from kio.index import KioIndexError, load_payload_module, load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.writers import Writable
from kio.static.constants import EntityType
from kio.static.primitive import i16

from app.kafka_listener.errors import ErrorCode
from app.kafka_listener.versions import ADVERTISED, ApiKey

HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id: the first 8 bytes of a request
_SIZE_CORRELATION = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class WireError(Exception):
    """A request that cannot be read: the connection it came on is closed."""


class _Chunks(list[bytes]):
    """A kio `Writable` that keeps every write as a chunk, joined once at the end (a BytesIO
    regrows and copies a large response several times)."""

    __slots__ = ("write",)

    def __init__(self) -> None:
        super().__init__()
        self.write = self.append


@functools.cache
def request_type(api_key: int, api_version: int) -> type[Any] | None:
    """kio's request class for (api_key, api_version), or None when kio has no such layout."""
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError:
        return None


@functools.cache
def response_type(api_key: int, api_version: int) -> type[Any] | None:
    """kio's response class for (api_key, api_version), or None when kio has no such layout."""
    try:
        return load_response_schema(api_key, api_version)
    except KioIndexError:
        return None


def peek(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (its size prefix removed)."""
    if len(frame) < HEAD.size:
        raise WireError(f"request of {len(frame)} bytes has no header")
    api_key, api_version, correlation_id = HEAD.unpack_from(frame)
    return int(api_key), int(api_version), int(correlation_id)


def decode_request(frame: bytes, request_cls: type[Any]) -> tuple[str | None, Any, int]:
    """(client_id, request, bytes read) of a request frame, with the header version kio gives the
    class. Any decoding failure (short, malformed, bad UTF-8) raises WireError. Bytes after the
    body are ignored, as Kafka does."""
    try:
        header, header_size = entity_reader(request_cls.__header_schema__)(frame, 0)
        request, body_size = entity_reader(request_cls)(frame, header_size)
    except Exception as exc:  # kio raises its DecodeErrors, ValueError, UnicodeDecodeError...
        raise WireError(f"undecodable {request_cls.__name__}: {type(exc).__name__}: {exc}") from exc
    return header.client_id, request, header_size + body_size


def encode_request(request: Any, correlation_id: int, client_id: str | None = None) -> bytes:
    """A whole request frame, size prefix included, for a kio request object: the client's side,
    for tests and benchmarks."""
    request_cls = type(request)
    header_cls = request_cls.__header_schema__
    header = header_cls(
        request_api_key=request_cls.__api_key__,
        request_api_version=request_cls.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    chunks = _Chunks()
    entity_writer(header_cls)(cast(Writable, chunks), header)
    entity_writer(request_cls)(cast(Writable, chunks), request)
    return b"".join([_I32.pack(sum(map(len, chunks))), *chunks])


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The frame of a kio response object: size, header (v0 or v1 as kio says), body."""
    return b"".join(response_parts(correlation_id, response))


def response_parts(correlation_id: int, response: Any) -> list[bytes]:
    """The frame of a kio response object as pieces for one gathered write: a large frame's
    pieces as kio wrote them (a Fetch's records are not copied again), a small one joined."""
    chunks = _Chunks()
    entity_writer(type(response))(cast(Writable, chunks), response)
    flexible_header = type(response).__header_schema__.__version__ == 1
    return frame_parts(correlation_id, chunks, flexible_header=flexible_header)


def frame_body(correlation_id: int, chunks: list[bytes], *, flexible_header: bool) -> bytes:
    """A response frame around an already encoded body (given as chunks)."""
    return b"".join(frame_parts(correlation_id, chunks, flexible_header=flexible_header))


def frame_parts(correlation_id: int, chunks: list[bytes], *, flexible_header: bool) -> list[bytes]:
    size = 4 + (1 if flexible_header else 0) + sum(map(len, chunks))
    head = _SIZE_CORRELATION.pack(size, correlation_id)
    if flexible_header:
        head += b"\x00"  # no tagged fields in the header
    if size < _GATHER_FROM_BYTES:
        return [b"".join([head, *chunks])]
    return [head, *chunks]


_GATHER_FROM_BYTES = 64 * 1024  # frames this large are written as pieces, smaller ones joined


# -- error answers the server gives by itself -------------------------------------------------


def api_versions_unsupported(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request of a version above ours: error 35 in the v0 body
    layout (which every version can read first), listing ApiVersions' own range so the client
    retries with a version we serve (KIP-511)."""
    low, high = ADVERTISED[ApiKey.API_VERSIONS]
    body = ApiVersionsResponseV0(
        error_code=ErrorCode.UNSUPPORTED_VERSION.kio,
        api_keys=(
            ApiVersionV0(api_key=i16(ApiKey.API_VERSIONS), min_version=i16(low), max_version=i16(high)),
        ),
    )
    return encode_response(correlation_id, body)


def produce_unsupported(frame: bytes, api_version: int) -> bytes | None:
    """The answer to a Produce v0-2 request (advertised, not served: see versions): every
    partition it names gets UNSUPPORTED_VERSION, in the v0/v1/v2 response layout. None for
    acks=0, whose producer reads no response (the connection is closed instead, as Kafka tells
    an acks=0 producer about an error). Raises WireError when the request cannot be read."""
    # Produce v0-2 is v3 without the leading transactional_id: read it as v3 with a null one.
    try:
        header, header_size = entity_reader(RequestHeaderV1)(frame, 0)
        body = b"\xff\xff" + frame[header_size:]
        request, _ = entity_reader(ProduceRequestV3)(body, 0)
    except Exception as exc:
        raise WireError(f"undecodable Produce v{api_version}: {exc}") from exc
    if request.acks == 0:
        return None
    chunks: list[bytes] = [_I32.pack(len(request.topic_data))]
    for topic in request.topic_data:
        name = topic.name.encode()
        chunks += [_I16.pack(len(name)), name, _I32.pack(len(topic.partition_data))]
        for partition in topic.partition_data:
            chunks.append(
                _I32.pack(partition.index) + _I16.pack(ErrorCode.UNSUPPORTED_VERSION) + _I64.pack(-1)
            )
            if api_version >= 2:
                chunks.append(_I64.pack(-1))  # log_append_time
    if api_version >= 1:
        chunks.append(_I32.pack(0))  # throttle_time_ms
    return frame_body(header.correlation_id, chunks, flexible_header=False)


def unsupported_version_response(api_key: int, api_version: int) -> Any | None:
    """A response of (api_key, api_version) whose top-level error_code is UNSUPPORTED_VERSION and
    whose other fields are empty, or None when kio has no such layout or it has no top-level
    error code (Produce, Metadata, ListOffsets, the admin APIs): the connection is closed."""
    response_cls = response_type(api_key, api_version)
    if response_cls is None or "error_code" not in {f.name for f in dataclasses.fields(response_cls)}:
        return None
    return _empty(response_cls, error_code=ErrorCode.UNSUPPORTED_VERSION.kio)


def _empty(entity_cls: type[Any], **values: Any) -> Any:
    """An instance of a kio entity with `values`, and every other field without a default set to
    its empty value (0, "", b"", (), None, an empty entity)."""
    for field in dataclasses.fields(entity_cls):
        if field.name in values or field.default is not dataclasses.MISSING:
            continue
        values[field.name] = _empty_value(field)
    return entity_cls(**values)


_EMPTY_BY_KAFKA_TYPE: dict[str, Any] = {
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": b"",
    "float64": 0.0,
    "uuid": uuid.UUID(int=0),
    "error_code": KioErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
}


def _empty_value(field: dataclasses.Field[Any]) -> Any:
    field_type = field.type
    origin = typing.get_origin(field_type)
    if origin is tuple:
        return ()
    if origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(field_type):
        return None
    if isinstance(field_type, type) and dataclasses.is_dataclass(field_type):
        return _empty(field_type)
    kafka_type = field.metadata.get("kafka_type", "")
    return _EMPTY_BY_KAFKA_TYPE.get(kafka_type, 0)  # every int type


def api_versions_response(api_version: int, rows: list[tuple[int, int, int]]) -> Any:
    """The ApiVersions response of `api_version` (0-3) listing `rows` of (api_key, min, max)."""
    module = load_payload_module(ApiKey.API_VERSIONS, api_version, EntityType.response)
    api_keys = tuple(
        module.ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, low, high in rows
    )
    values: dict[str, Any] = {"error_code": ErrorCode.NONE.kio, "api_keys": api_keys}
    if api_version >= 1:
        values["throttle_time"] = datetime.timedelta(0)
    return module.ApiVersionsResponse(**values)
