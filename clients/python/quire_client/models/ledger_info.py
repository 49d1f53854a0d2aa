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
            ack_quorum (int | None | Unset): copies that acknowledged each entry
            ensembles (Ensembles | Unset): its ensemble history: first entry id -> the bookies from that entry on
            under_replicated (bool | Unset): some of its copies are on a lost or decommissioning bookie (being replaced)
                Default: False.
            write_quorum (int | None | Unset): copies of each entry (absent when the ledger was just deleted)
     """

    entries: int
    ledger_id: int
    size: int
    timestamp: int
    ack_quorum: int | None | Unset = UNSET
    ensembles: Ensembles | Unset = UNSET
    under_replicated: bool | Unset = False
    write_quorum: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.ensembles import Ensembles # noqa: PLC0415
        entries = self.entries

        ledger_id = self.ledger_id

        size = self.size

        timestamp = self.timestamp

        ack_quorum: int | None | Unset
        if isinstance(self.ack_quorum, Unset):
            ack_quorum = UNSET
        else:
            ack_quorum = self.ack_quorum

        ensembles: dict[str, Any] | Unset = UNSET
        if not isinstance(self.ensembles, Unset):
            ensembles = self.ensembles.to_dict()

        under_replicated = self.under_replicated

        write_quorum: int | None | Unset
        if isinstance(self.write_quorum, Unset):
            write_quorum = UNSET
        else:
            write_quorum = self.write_quorum


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "entries": entries,
            "ledgerId": ledger_id,
            "size": size,
            "timestamp": timestamp,
        })
        if ack_quorum is not UNSET:
            field_dict["ackQuorum"] = ack_quorum
        if ensembles is not UNSET:
            field_dict["ensembles"] = ensembles
        if under_replicated is not UNSET:
            field_dict["underReplicated"] = under_replicated
        if write_quorum is not UNSET:
            field_dict["writeQuorum"] = write_quorum

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ensembles import Ensembles # noqa: PLC0415
        d = dict(src_dict)
        entries = d.pop("entries")

        ledger_id = d.pop("ledgerId")

        size = d.pop("size")

        timestamp = d.pop("timestamp")

        def _parse_ack_quorum(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ack_quorum = _parse_ack_quorum(d.pop("ackQuorum", UNSET))


        _ensembles = d.pop("ensembles", UNSET)
        ensembles: Ensembles | Unset
        if isinstance(_ensembles,  Unset):
            ensembles = UNSET
        else:
            ensembles = Ensembles.from_dict(_ensembles)




        under_replicated = d.pop("underReplicated", UNSET)

        def _parse_write_quorum(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        write_quorum = _parse_write_quorum(d.pop("writeQuorum", UNSET))


        ledger_info = cls(
            entries=entries,
            ledger_id=ledger_id,
            size=size,
            timestamp=timestamp,
            ack_quorum=ack_quorum,
            ensembles=ensembles,
            under_replicated=under_replicated,
            write_quorum=write_quorum,
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
