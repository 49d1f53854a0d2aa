"""A subscription's read-ahead: the messages read from its cursors and not handed out yet, as
(partition, message) in read order (Pulsar's dispatcher reads ahead the same way). A consumer
of the whole topic takes from the front; a consumer of one partition (the Pulsar door's
partition consumers) takes the first of that partition and leaves the others in order."""

from __future__ import annotations

from collections import deque

from managed_ledger.entry_format import StoredMessage


class ReadyQueue(deque[tuple[int, StoredMessage]]):
    def take(self, only: int | None) -> tuple[int, StoredMessage] | None:
        """The first message (of partition `only`, when given); None when there is none."""
        if only is None:
            return self.popleft() if self else None
        for i, item in enumerate(self):
            if item[0] == only:
                del self[i]
                return item
        return None
