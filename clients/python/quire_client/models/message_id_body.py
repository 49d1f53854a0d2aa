from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="MessageIdBody")



@_attrs_define
class MessageIdBody:
    """ 
        Attributes:
            message_id (str): ledger:entry:batch_index
     """

    message_id: str





    def to_dict(self) -> dict[str, Any]:
        message_id = self.message_id


        field_dict: dict[str, Any] = {}

        field_dict.update({
            "messageId": message_id,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        message_id = d.pop("messageId")

        message_id_body = cls(
            message_id=message_id,
        )

        return message_id_body

