"""Bugs the campaign found that are still open, each with the signature that recognises it.

A violation on a topic that a known bug explains is still counted and printed (with the bug's
name), but does not fail the campaign: the narrow reproduction in
`tests/chaos/test_found_by_chaos.py` (strict xfail) is what fails once the bug is fixed, and then
its entry here goes too. A signature is deliberately narrow: it names the ledger the read-back
failed on and needs the logs to say why, so that another bug with the same symptom still fails.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.chaos.history import History

SINGLE_COPY = "recovery-single-copy"
KNOWN_BUGS = {
    SINGLE_COPY: (
        "ledger recovery closed a ledger with an entry on fewer bookies than the ack quorum (the rest of "
        "its write set was down, stopped or read-only), nothing copied it since, then that one bookie "
        "was wiped (tests/chaos/test_found_by_chaos.py)"
    ),
}
_UNREADABLE_LEDGER = re.compile(r"NO_SUCH_(?:LEDGER|ENTRY): ledger (\d+)")
_SHORT_RECOVERY = re.compile(r"recovery of ledger (\d+): entry \d+ is on (\d+) bookies, ack quorum (\d+)")


def short_recoveries(log_dir: Path) -> set[int]:
    """Ledgers some process's log says recovery closed with an entry short of its ack quorum."""
    found: set[int] = set()
    for log in log_dir.glob("*.log"):
        for match in _SHORT_RECOVERY.finditer(log.read_text(errors="replace")):
            if int(match.group(2)) < int(match.group(3)):
                found.add(int(match.group(1)))
    return found


def known_topics(history: History, log_dir: Path) -> dict[str, str]:
    """topic -> the known bug that explains its read-back failure."""
    wiped = any(f.kind == "wipe-bookie" for f in history.faults)
    short = short_recoveries(log_dir) if history.unreadable else set()
    out = {}
    for topic, failure in history.unreadable:
        match = _UNREADABLE_LEDGER.search(failure)
        if match and wiped and int(match.group(1)) in short:
            out[topic] = SINGLE_COPY
    return out
