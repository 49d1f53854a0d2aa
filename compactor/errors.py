"""Errors of the compactor.

A run that fails raises `CompactionError` (or a subclass); the runner records its message as the
topic's `last_error` with status ERROR. Foreign exceptions (Spark, bookie, metadata) are wrapped
at the boundary with `from exc` so the cause stays visible in logs.
"""

from __future__ import annotations

from common.errors import ErrorKind, QuireError


class CompactionError(QuireError):
    """A compaction run failed; the previous compacted view is untouched."""

    kind = ErrorKind.internal


class CompactionRunConflictError(CompactionError):
    """A run is already in progress for this topic (someone else won the state CAS)."""

    kind = ErrorKind.conflict
    title = "Compaction already running"


class SparkJobError(CompactionError):
    """The PySpark job failed (a task could not read the bookies, the session died, ...)."""

    kind = ErrorKind.unavailable
    retriable = True


class CompactionTopicNotFoundError(CompactionError):
    """The managed ledger to compact does not exist in the metadata store."""

    kind = ErrorKind.not_found
    title = "Topic not found"


class LeaseLostError(CompactionError):
    """The run's lease lapsed or another process took the state over: the run records nothing."""

    kind = ErrorKind.conflict
    title = "Compaction lease lost"
