"""Applying the log to the ledger table and the index: one code path for every caller.

The live write path (after a group's fsync), start-up replay and the garbage collector all
change the index through these functions, so a record means the same thing whether it is
being written now or read back after a crash.
"""

from __future__ import annotations

from collections.abc import Iterator

from bookie.storage.index import EntryIndex, IndexDamagedError, LedgerState, SlotRuns, encode_slot
from bookie.storage.journal import SegmentFiles
from bookie.storage.records import ADD, DELETE, FENCE, scan_segment

REPOINT_YIELD_EVERY = 2000  # records between two pauses of `repoint_segment`


def apply_record(
    ledgers: dict[int, LedgerState],
    runs: SlotRuns,
    record_type: int,
    ledger_id: int,
    entry_id: int,
    last_add_confirmed: int,
    slot: bytes,
) -> None:
    """Apply one durable record to the ledger table and (through `runs`) to the index.

    `slot` is the encoded index slot of an ADD (where its record sits); markers pass b""."""
    if record_type == ADD:
        assert ledger_id >= 0 and entry_id >= 0 and slot, "only valid adds reach the log"
        st = ledgers.get(ledger_id)
        if st is None:
            st = ledgers[ledger_id] = LedgerState()
        if entry_id > st.last_entry_id:
            st.last_entry_id = entry_id
        if last_add_confirmed > st.last_add_confirmed:
            st.last_add_confirmed = last_add_confirmed
        runs.add(ledger_id, entry_id, slot)
    elif record_type == FENCE:
        ledgers.setdefault(ledger_id, LedgerState()).fenced = True
    else:
        assert record_type == DELETE, f"unknown record type {record_type}"
        ledgers.pop(ledger_id, None)
        runs.remove_ledger(ledger_id)


def repoint_segment(
    segments: SegmentFiles, index: EntryIndex, segment: int, generation: int, touched: set[int]
) -> Iterator[None]:
    """Point every slot that refers to another generation of `segment` at this generation's copy.

    A generator: it pauses every `REPOINT_YIELD_EVERY` records so that the garbage collector
    can let the event loop run between steps; start-up simply runs it to the end. The ledgers
    whose index files were written are added to `touched` (the caller syncs them)."""
    _result, records = scan_segment(segments.path(segment, generation))
    for count, rec in enumerate(records, 1):
        if rec.type == ADD:
            try:
                slot = index.lookup(rec.ledger_id, rec.entry_id)
            except IndexDamagedError:
                slot = None  # a damaged slot is found again on read and rebuilds the index
            if slot is not None and slot.segment == segment and slot.generation != generation:
                index.write_slots(
                    rec.ledger_id, rec.entry_id, encode_slot(segment, generation, rec.offset, rec.length)
                )
                touched.add(rec.ledger_id)
        if count % REPOINT_YIELD_EVERY == 0:
            yield


def repoint_segment_now(segments: SegmentFiles, index: EntryIndex, segment: int, generation: int) -> set[int]:
    """`repoint_segment` run to the end at once (start-up has no event loop to serve)."""
    touched: set[int] = set()
    for _pause in repoint_segment(segments, index, segment, generation, touched):
        pass
    return touched
