from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset






T = TypeVar("T", bound="CompactedLedgerInfo")



@_attrs_define
class CompactedLedgerInfo:
    """ 
        Attributes:
            entries (int | Unset):  Default: -1.
            ledger_id (int | Unset):  Default: -1.
            size (int | Unset):  Default: -1.
     """

    entries: int | Unset = -1
    ledger_id: int | Unset = -1
    size: int | Unset = -1
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        entries = self.entries

        ledger_id = self.ledger_id

        size = self.size


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if entries is not UNSET:
            field_dict["entries"] = entries
        if ledger_id is not UNSET:
            field_dict["ledgerId"] = ledger_id
        if size is not UNSET:
            field_dict["size"] = size

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        entries = d.pop("entries", UNSET)

        ledger_id = d.pop("ledgerId", UNSET)

        size = d.pop("size", UNSET)

        compacted_ledger_info = cls(
            entries=entries,
            ledger_id=ledger_id,
            size=size,
        )


        compacted_ledger_info.additional_properties = d
        return compacted_ledger_info

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
