from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.ensembles import Ensembles





T = TypeVar("T", bound="LedgerInfo")



@_attrs_define
class LedgerInfo:
    """ 
        Attributes:
            entries (int):
            ledger_id (int):
            size (int):
            timestamp (int):
            ensembles (Ensembles | Unset): its ensemble history: first entry id -> the bookies from that entry on
            under_replicated (bool | Unset): some of its copies are on a lost or decommissioning bookie (being replaced)
                Default: False.
     """

    entries: int
    ledger_id: int
    size: int
    timestamp: int
    ensembles: Ensembles | Unset = UNSET
    under_replicated: bool | Unset = False
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.ensembles import Ensembles # noqa: PLC0415
        entries = self.entries

        ledger_id = self.ledger_id

        size = self.size

        timestamp = self.timestamp

        ensembles: dict[str, Any] | Unset = UNSET
        if not isinstance(self.ensembles, Unset):
            ensembles = self.ensembles.to_dict()

        under_replicated = self.under_replicated


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "entries": entries,
            "ledgerId": ledger_id,
            "size": size,
            "timestamp": timestamp,
        })
        if ensembles is not UNSET:
            field_dict["ensembles"] = ensembles
        if under_replicated is not UNSET:
            field_dict["underReplicated"] = under_replicated

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ensembles import Ensembles # noqa: PLC0415
        d = dict(src_dict)
        entries = d.pop("entries")

        ledger_id = d.pop("ledgerId")

        size = d.pop("size")

        timestamp = d.pop("timestamp")

        _ensembles = d.pop("ensembles", UNSET)
        ensembles: Ensembles | Unset
        if isinstance(_ensembles,  Unset):
            ensembles = UNSET
        else:
            ensembles = Ensembles.from_dict(_ensembles)




        under_replicated = d.pop("underReplicated", UNSET)

        ledger_info = cls(
            entries=entries,
            ledger_id=ledger_id,
            size=size,
            timestamp=timestamp,
            ensembles=ensembles,
            under_replicated=under_replicated,
        )


        ledger_info.additional_properties = d
        return ledger_info

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
