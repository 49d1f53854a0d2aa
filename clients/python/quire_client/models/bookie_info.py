from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.bookie_info_state import BookieInfoState






T = TypeVar("T", bound="BookieInfo")



@_attrs_define
class BookieInfo:
    """ 
        Attributes:
            bookie_id (str): host:port
            free_bytes (int): free bytes on its disk
            ledgers (int): ledgers on its disk, as of its last heartbeat
            state (BookieInfoState): down: its heartbeat expired; read_only: its disk is nearly full; decommissioning: its
                ledgers are being copied elsewhere; decommissioned: drained, it may be stopped
     """

    bookie_id: str
    free_bytes: int
    ledgers: int
    state: BookieInfoState
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        bookie_id = self.bookie_id

        free_bytes = self.free_bytes

        ledgers = self.ledgers

        state = self.state.value


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "bookieId": bookie_id,
            "freeBytes": free_bytes,
            "ledgers": ledgers,
            "state": state,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bookie_id = d.pop("bookieId")

        free_bytes = d.pop("freeBytes")

        ledgers = d.pop("ledgers")

        state = BookieInfoState(d.pop("state"))




        bookie_info = cls(
            bookie_id=bookie_id,
            free_bytes=free_bytes,
            ledgers=ledgers,
            state=state,
        )


        bookie_info.additional_properties = d
        return bookie_info

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
