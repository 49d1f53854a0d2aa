from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="CursorStats")



@_attrs_define
class CursorStats:
    """ 
        Attributes:
            individually_deleted_messages (str):
            mark_delete_position (str):
            read_position (str):
     """

    individually_deleted_messages: str
    mark_delete_position: str
    read_position: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        individually_deleted_messages = self.individually_deleted_messages

        mark_delete_position = self.mark_delete_position

        read_position = self.read_position


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "individuallyDeletedMessages": individually_deleted_messages,
            "markDeletePosition": mark_delete_position,
            "readPosition": read_position,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        individually_deleted_messages = d.pop("individuallyDeletedMessages")

        mark_delete_position = d.pop("markDeletePosition")

        read_position = d.pop("readPosition")

        cursor_stats = cls(
            individually_deleted_messages=individually_deleted_messages,
            mark_delete_position=mark_delete_position,
            read_position=read_position,
        )


        cursor_stats.additional_properties = d
        return cursor_stats

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
