"""A subscription's read-ahead: the messages read from its cursors and not handed out yet, as
(partition, message) in read order (Pulsar's dispatcher reads ahead the same way). A consumer
of the whole topic takes from the front; a consumer of one partition (the Pulsar door's
partition consumers) takes the first of that partition and leaves the others in order."""

from __future__ import annotations

from collections import deque

from managed_ledger.entry_format import StoredMessage
from managed_ledger.position import Position


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

    def take_of_entry(self, position: Position, only: int | None) -> tuple[int, StoredMessage] | None:
        """The next message (of partition `only`, when given) if it is of the entry at
        `position`, else None: the rest of an entry handed out whole."""
        for i, item in enumerate(self):
            if only is None or item[0] == only:
                if item[1].message_id.position != position:
                    return None
                del self[i]
                return item
        return None
