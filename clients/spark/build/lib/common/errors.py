"""The root of every Quire exception, and the kinds that say what a failure means to a caller.

Each package's errors derive from `QuireError` and set `kind` as a class attribute, so a caller
(the HTTP edge, a retry loop) branches on what went wrong rather than on a class name. `retriable`
says whether the same request may succeed if tried again. The HTTP edge maps each kind to one
status (see `app/errors.py`); an error's own `title`, when it has one, names the case better than
the kind's default title does.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """What a failure means to the caller, independent of the layer that raised it."""

    not_found = "not_found"
    """The thing asked for does not exist (or no longer does)."""
    conflict = "conflict"
    """The request clashes with the current state: it exists already, is not empty, is busy or
    running, or someone else updated it concurrently."""
    invalid = "invalid"
    """A malformed or invalid argument: the same request can never succeed."""
    bad_request = "bad_request"
    """A well-formed request over one of the server's caps (a query asking for too much)."""
    too_large = "too_large"
    """The request's content is over a size limit."""
    throttled = "throttled"
    """The request is refused for now by a limit on the state it would add to (a backlog quota);
    it may succeed once that state shrinks (consumers ack): retry later."""
    unavailable = "unavailable"
    """Something below cannot serve now (storage, metadata, bookies); trying later may work."""
    fenced = "fenced"
    """The topic moved to another owner, or is closing: retry, and the new owner answers."""
    elsewhere = "elsewhere"
    """Another broker owns the topic: ask it (the error names its URL)."""
    internal = "internal"
    """A bug or damaged data on our side, never the caller's fault."""


class QuireError(Exception):
    """Root of every Quire exception; each package's errors derive from it."""

    kind: ErrorKind = ErrorKind.internal
    retriable: bool = False
    title: str | None = None
