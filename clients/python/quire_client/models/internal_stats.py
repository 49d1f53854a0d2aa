from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.compacted_ledger_info import CompactedLedgerInfo
  from ..models.cursors import Cursors
  from ..models.ledger_info import LedgerInfo





T = TypeVar("T", bound="InternalStats")



@_attrs_define
class InternalStats:
    """ 
        Attributes:
            compacted_ledger (CompactedLedgerInfo):
            current_ledger_entries (int):
            current_ledger_size (int):
            cursors (Cursors):
            entries_added_counter (int):
            last_confirmed_entry (str):
            ledgers (list[LedgerInfo]):
            number_of_entries (int):
            total_size (int):
            compaction_horizon (None | str | Unset):
     """

    compacted_ledger: CompactedLedgerInfo
    current_ledger_entries: int
    current_ledger_size: int
    cursors: Cursors
    entries_added_counter: int
    last_confirmed_entry: str
    ledgers: list[LedgerInfo]
    number_of_entries: int
    total_size: int
    compaction_horizon: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.compacted_ledger_info import CompactedLedgerInfo # noqa: PLC0415
        from ..models.cursors import Cursors # noqa: PLC0415
        from ..models.ledger_info import LedgerInfo # noqa: PLC0415
        compacted_ledger = self.compacted_ledger.to_dict()

        current_ledger_entries = self.current_ledger_entries

        current_ledger_size = self.current_ledger_size

        cursors = self.cursors.to_dict()

        entries_added_counter = self.entries_added_counter

        last_confirmed_entry = self.last_confirmed_entry

        ledgers = []
        for ledgers_item_data in self.ledgers:
            ledgers_item = ledgers_item_data.to_dict()
            ledgers.append(ledgers_item)



        number_of_entries = self.number_of_entries

        total_size = self.total_size

        compaction_horizon: None | str | Unset
        if isinstance(self.compaction_horizon, Unset):
            compaction_horizon = UNSET
        else:
            compaction_horizon = self.compaction_horizon


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "compactedLedger": compacted_ledger,
            "currentLedgerEntries": current_ledger_entries,
            "currentLedgerSize": current_ledger_size,
            "cursors": cursors,
            "entriesAddedCounter": entries_added_counter,
            "lastConfirmedEntry": last_confirmed_entry,
            "ledgers": ledgers,
            "numberOfEntries": number_of_entries,
            "totalSize": total_size,
        })
        if compaction_horizon is not UNSET:
            field_dict["compactionHorizon"] = compaction_horizon

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.compacted_ledger_info import CompactedLedgerInfo # noqa: PLC0415
        from ..models.cursors import Cursors # noqa: PLC0415
        from ..models.ledger_info import LedgerInfo # noqa: PLC0415
        d = dict(src_dict)
        compacted_ledger = CompactedLedgerInfo.from_dict(d.pop("compactedLedger"))




        current_ledger_entries = d.pop("currentLedgerEntries")

        current_ledger_size = d.pop("currentLedgerSize")

        cursors = Cursors.from_dict(d.pop("cursors"))




        entries_added_counter = d.pop("entriesAddedCounter")

        last_confirmed_entry = d.pop("lastConfirmedEntry")

        ledgers = []
        _ledgers = d.pop("ledgers")
        for ledgers_item_data in (_ledgers):
            ledgers_item = LedgerInfo.from_dict(ledgers_item_data)



            ledgers.append(ledgers_item)


        number_of_entries = d.pop("numberOfEntries")

        total_size = d.pop("totalSize")

        def _parse_compaction_horizon(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        compaction_horizon = _parse_compaction_horizon(d.pop("compactionHorizon", UNSET))


        internal_stats = cls(
            compacted_ledger=compacted_ledger,
            current_ledger_entries=current_ledger_entries,
            current_ledger_size=current_ledger_size,
            cursors=cursors,
            entries_added_counter=entries_added_counter,
            last_confirmed_entry=last_confirmed_entry,
            ledgers=ledgers,
            number_of_entries=number_of_entries,
            total_size=total_size,
            compaction_horizon=compaction_horizon,
        )


        internal_stats.additional_properties = d
        return internal_stats

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
