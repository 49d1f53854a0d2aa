"""Positions in a managed ledger and message ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Position(NamedTuple):
    """An entry's place in a managed ledger: (ledger_id, entry_id), ordered as a tuple."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def parse(cls, text: str) -> Position:
        ledger, _, entry = text.partition(":")
        return cls(int(ledger), int(entry))


class MessageId(NamedTuple):
    """A message's id: its entry's position plus its index in the entry's batch.

    Text form `ledger:entry:batch_index`, e.g. `12:40:3`; ordered by the three numbers; stable
    forever, including after compaction.
    """

    ledger_id: int
    entry_id: int
    batch_index: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"

    @property
    def position(self) -> Position:
        return Position(self.ledger_id, self.entry_id)

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Parse `L:E:B` (or `L:E`, batch index 0). Raises ValueError on anything else."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(
            p.isdigit() or (p.startswith("-") and p[1:].isdigit()) for p in parts
        ):
            raise ValueError(f"invalid message id {text!r}: expected ledger:entry:batch_index")
        nums = [int(p) for p in parts]
        if len(nums) == 2:
            nums.append(0)
        if nums[0] < 0 or nums[1] < 0 or nums[2] < 0:
            raise ValueError(f"invalid message id {text!r}: parts must be >= 0")
        return cls(nums[0], nums[1], nums[2])


@dataclass(frozen=True, slots=True)
class PositionRange:
    """A closed range of positions [first, last]."""

    first: Position
    last: Position
