"""The connector's errors: one root, translated from httpx and the bookie client at the edge."""

from __future__ import annotations


class QuireSparkError(Exception):
    """Root of the connector's errors. `retriable`: the same call may succeed later."""

    retriable = False


class QuireOptionError(QuireSparkError, ValueError):
    """An option is missing, unknown or malformed: refused on the driver, before any job runs."""


class QuireServiceError(QuireSparkError):
    """The service answered with an error (its problem+json detail is in the message)."""


class QuireDataLossError(QuireSparkError):
    """Messages the query still needed are gone (retention or truncation removed them)."""
