"""Plain values shared by the bookie client and its callers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """What a client must know to reach a ledger: its id, its ensemble and its quorums.

    The metadata store owns these facts (as ZooKeeper does for BookKeeper); the client only
    uses them. `ensemble` holds bookie addresses "host:port". With E=Qw=Qa=1 a ledger lives on
    one bookie; entry e is written to ensemble[(e + i) % E] for i in range(write_quorum), and an
    add is acknowledged once ack_quorum of those bookies have made it durable.
    """

    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int = 1
    ack_quorum: int = 1

    def __post_init__(self) -> None:
        e = len(self.ensemble)
        if not (e >= self.write_quorum >= self.ack_quorum >= 1):
            raise ValueError(
                f"need ensemble >= write_quorum >= ack_quorum >= 1, got "
                f"{e}/{self.write_quorum}/{self.ack_quorum}"
            )

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        e = len(self.ensemble)
        return tuple(self.ensemble[(entry_id + i) % e] for i in range(self.write_quorum))
