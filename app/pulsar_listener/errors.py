"""The Pulsar listener's errors, and Quire's errors as Pulsar's `ServerError` codes.

`PulsarFrameError` means the bytes of a connection cannot be trusted any more: the connection is
closed (only that one). Every other failure is answered on the connection with an ERROR,
SEND_ERROR or a failed lookup carrying a `ServerError`, as the Java broker answers it (the
client decides from the code whether to retry).
"""

from __future__ import annotations

from common.errors import ErrorKind, QuireError
from topics.errors import (
    BacklogQuotaExceededError,
    BatchTooLargeError,
    ConsumerAssignError,
    ConsumerBusyError,
    IncompatibleSchemaError,
    InvalidNameError,
    InvalidSchemaError,
    MessageTooLargeError,
    NamespaceNotFoundError,
    NotOwnerError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
    TopicTerminatedError,
)

from .proto import pulsar_api_pb2 as pb


class PulsarError(QuireError):
    """Root of the listener's errors: answered to the client with `server_error`."""

    kind = ErrorKind.invalid
    server_error: pb.ServerError.ValueType = pb.UnknownError

    def __init__(self, message: str, server_error: pb.ServerError.ValueType | None = None) -> None:
        super().__init__(message)
        if server_error is not None:
            self.server_error = server_error


class PulsarFrameError(PulsarError):
    """A frame that cannot be read: its connection is closed."""


# Most specific first: the first class an error is an instance of gives its code.
_CODES: tuple[tuple[type[Exception], pb.ServerError.ValueType], ...] = (
    (PulsarError, pb.UnknownError),  # its own server_error, see server_error_of
    (TopicNotFoundError, pb.TopicNotFound),
    (NamespaceNotFoundError, pb.TopicNotFound),
    (TenantNotFoundError, pb.TopicNotFound),
    (InvalidNameError, pb.InvalidTopicName),
    (IncompatibleSchemaError, pb.IncompatibleSchema),
    (InvalidSchemaError, pb.IncompatibleSchema),  # Pulsar's answer to an invalid schema too
    (SubscriptionNotFoundError, pb.SubscriptionNotFound),
    (ConsumerBusyError, pb.ConsumerBusy),
    (ConsumerAssignError, pb.ConsumerAssignError),
    (TopicTerminatedError, pb.TopicTerminatedError),
    (BacklogQuotaExceededError, pb.ProducerBlockedQuotaExceededException),
    (MessageTooLargeError, pb.NotAllowedError),
    (BatchTooLargeError, pb.NotAllowedError),
    # Another broker owns the topic: the client looks it up again (ServiceNotReady closes the
    # connection and retries with a new lookup).
    (NotOwnerError, pb.ServiceNotReady),
)


def server_error_of(exc: Exception) -> pb.ServerError.ValueType:
    if isinstance(exc, PulsarError):
        return exc.server_error
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    if isinstance(exc, QuireError) and exc.kind is ErrorKind.invalid:
        return pb.NotAllowedError
    return pb.UnknownError
