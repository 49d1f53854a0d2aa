from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.value_encoding import ValueEncoding
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.properties import Properties





T = TypeVar("T", bound="MessageOut")



@_attrs_define
class MessageOut:
    """ 
        Attributes:
            message_id (str):
            publish_time (int):
            value (str):
            event_time (int | None | Unset):
            key (None | str | Unset):
            producer_name (None | str | Unset):
            properties (Properties | Unset):
            redelivery_count (int | Unset):  Default: 0.
            sequence_id (int | None | Unset):
            value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text` means: text when the
                payload is UTF-8.
     """

    message_id: str
    publish_time: int
    value: str
    event_time: int | None | Unset = UNSET
    key: None | str | Unset = UNSET
    producer_name: None | str | Unset = UNSET
    properties: Properties | Unset = UNSET
    redelivery_count: int | Unset = 0
    sequence_id: int | None | Unset = UNSET
    value_encoding: ValueEncoding | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.properties import Properties # noqa: PLC0415
        message_id = self.message_id

        publish_time = self.publish_time

        value = self.value

        event_time: int | None | Unset
        if isinstance(self.event_time, Unset):
            event_time = UNSET
        else:
            event_time = self.event_time

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        producer_name: None | str | Unset
        if isinstance(self.producer_name, Unset):
            producer_name = UNSET
        else:
            producer_name = self.producer_name

        properties: dict[str, Any] | Unset = UNSET
        if not isinstance(self.properties, Unset):
            properties = self.properties.to_dict()

        redelivery_count = self.redelivery_count

        sequence_id: int | None | Unset
        if isinstance(self.sequence_id, Unset):
            sequence_id = UNSET
        else:
            sequence_id = self.sequence_id

        value_encoding: str | Unset = UNSET
        if not isinstance(self.value_encoding, Unset):
            value_encoding = self.value_encoding.value



        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "message_id": message_id,
            "publish_time": publish_time,
            "value": value,
        })
        if event_time is not UNSET:
            field_dict["event_time"] = event_time
        if key is not UNSET:
            field_dict["key"] = key
        if producer_name is not UNSET:
            field_dict["producer_name"] = producer_name
        if properties is not UNSET:
            field_dict["properties"] = properties
        if redelivery_count is not UNSET:
            field_dict["redelivery_count"] = redelivery_count
        if sequence_id is not UNSET:
            field_dict["sequence_id"] = sequence_id
        if value_encoding is not UNSET:
            field_dict["value_encoding"] = value_encoding

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.properties import Properties # noqa: PLC0415
        d = dict(src_dict)
        message_id = d.pop("message_id")

        publish_time = d.pop("publish_time")

        value = d.pop("value")

        def _parse_event_time(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        event_time = _parse_event_time(d.pop("event_time", UNSET))


        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))


        def _parse_producer_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        producer_name = _parse_producer_name(d.pop("producer_name", UNSET))


        _properties = d.pop("properties", UNSET)
        properties: Properties | Unset
        if isinstance(_properties,  Unset):
            properties = UNSET
        else:
            properties = Properties.from_dict(_properties)




        redelivery_count = d.pop("redelivery_count", UNSET)

        def _parse_sequence_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        sequence_id = _parse_sequence_id(d.pop("sequence_id", UNSET))


        _value_encoding = d.pop("value_encoding", UNSET)
        value_encoding: ValueEncoding | Unset
        if isinstance(_value_encoding,  Unset):
            value_encoding = UNSET
        else:
            value_encoding = ValueEncoding(_value_encoding)




        message_out = cls(
            message_id=message_id,
            publish_time=publish_time,
            value=value,
            event_time=event_time,
            key=key,
            producer_name=producer_name,
            properties=properties,
            redelivery_count=redelivery_count,
            sequence_id=sequence_id,
            value_encoding=value_encoding,
        )


        message_out.additional_properties = d
        return message_out

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
