from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.message_out import MessageOut





T = TypeVar("T", bound="MessageList")



@_attrs_define
class MessageList:
    """ 
        Attributes:
            messages (list[MessageOut]):
            end_of_topic (bool | Unset): the topic is terminated and nothing of it is left to receive (or to read) Default:
                False.
     """

    messages: list[MessageOut]
    end_of_topic: bool | Unset = False
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.message_out import MessageOut # noqa: PLC0415
        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)



        end_of_topic = self.end_of_topic


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "messages": messages,
        })
        if end_of_topic is not UNSET:
            field_dict["end_of_topic"] = end_of_topic

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.message_out import MessageOut # noqa: PLC0415
        d = dict(src_dict)
        messages = []
        _messages = d.pop("messages")
        for messages_item_data in (_messages):
            messages_item = MessageOut.from_dict(messages_item_data)



            messages.append(messages_item)


        end_of_topic = d.pop("end_of_topic", UNSET)

        message_list = cls(
            messages=messages,
            end_of_topic=end_of_topic,
        )


        message_list.additional_properties = d
        return message_list

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
