from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="RolloverPolicy")



@_attrs_define
class RolloverPolicy:
    """ 
        Attributes:
            max_entries_per_ledger (int):
            max_rollover_time_ms (int):
            max_size_per_ledger_bytes (int):
            min_rollover_time_ms (int):
     """

    max_entries_per_ledger: int
    max_rollover_time_ms: int
    max_size_per_ledger_bytes: int
    min_rollover_time_ms: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        max_entries_per_ledger = self.max_entries_per_ledger

        max_rollover_time_ms = self.max_rollover_time_ms

        max_size_per_ledger_bytes = self.max_size_per_ledger_bytes

        min_rollover_time_ms = self.min_rollover_time_ms


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "maxEntriesPerLedger": max_entries_per_ledger,
            "maxRolloverTimeMs": max_rollover_time_ms,
            "maxSizePerLedgerBytes": max_size_per_ledger_bytes,
            "minRolloverTimeMs": min_rollover_time_ms,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        max_entries_per_ledger = d.pop("maxEntriesPerLedger")

        max_rollover_time_ms = d.pop("maxRolloverTimeMs")

        max_size_per_ledger_bytes = d.pop("maxSizePerLedgerBytes")

        min_rollover_time_ms = d.pop("minRolloverTimeMs")

        rollover_policy = cls(
            max_entries_per_ledger=max_entries_per_ledger,
            max_rollover_time_ms=max_rollover_time_ms,
            max_size_per_ledger_bytes=max_size_per_ledger_bytes,
            min_rollover_time_ms=min_rollover_time_ms,
        )


        rollover_policy.additional_properties = d
        return rollover_policy

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
