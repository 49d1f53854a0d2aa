from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.produce_message import ProduceMessage





T = TypeVar("T", bound="ProduceRequest")



@_attrs_define
class ProduceRequest:
    """ 
        Attributes:
            messages (list[ProduceMessage]):
            producer_name (None | str | Unset):
     """

    messages: list[ProduceMessage]
    producer_name: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.produce_message import ProduceMessage # noqa: PLC0415
        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)



        producer_name: None | str | Unset
        if isinstance(self.producer_name, Unset):
            producer_name = UNSET
        else:
            producer_name = self.producer_name


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "messages": messages,
        })
        if producer_name is not UNSET:
            field_dict["producer_name"] = producer_name

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.produce_message import ProduceMessage # noqa: PLC0415
        d = dict(src_dict)
        messages = []
        _messages = d.pop("messages")
        for messages_item_data in (_messages):
            messages_item = ProduceMessage.from_dict(messages_item_data)



            messages.append(messages_item)


        def _parse_producer_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        producer_name = _parse_producer_name(d.pop("producer_name", UNSET))


        produce_request = cls(
            messages=messages,
            producer_name=producer_name,
        )


        produce_request.additional_properties = d
        return produce_request

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
