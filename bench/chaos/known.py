"""Bugs the campaign found that are still open, each with the signature that recognises it.

A violation on a topic that a known bug explains is still counted and printed (with the bug's
name), but does not fail the campaign: the narrow reproduction in
`tests/chaos/test_found_by_chaos.py` (strict xfail) is what fails once the bug is fixed, and then
its entry here goes too. A signature is deliberately narrow: it names the ledger the read-back
failed on and needs the logs to say why, so that another bug with the same symptom still fails.
"""

from __future__ import annotations

from pathlib import Path

from bench.chaos.history import History

# None open. The first one found, a ledger closed by recovery with an entry on fewer bookies than
# its ack quorum (then lost with that one bookie), is fixed: recovery replaces the unreachable
# members or fails, and tests/chaos/test_found_by_chaos.py guards it.
KNOWN_BUGS: dict[str, str] = {}


def known_topics(history: History, log_dir: Path) -> dict[str, str]:
    """topic -> the known bug that explains its read-back failure (none while none is open)."""
    del history, log_dir
    return {}
