from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="SubscriptionStats")



@_attrs_define
class SubscriptionStats:
    """ 
        Attributes:
            msg_backlog (int):
            type_ (str):
            unacked_messages (int):
     """

    msg_backlog: int
    type_: str
    unacked_messages: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        msg_backlog = self.msg_backlog

        type_ = self.type_

        unacked_messages = self.unacked_messages


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "msgBacklog": msg_backlog,
            "type": type_,
            "unackedMessages": unacked_messages,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        msg_backlog = d.pop("msgBacklog")

        type_ = d.pop("type")

        unacked_messages = d.pop("unackedMessages")

        subscription_stats = cls(
            msg_backlog=msg_backlog,
            type_=type_,
            unacked_messages=unacked_messages,
        )


        subscription_stats.additional_properties = d
        return subscription_stats

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
