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
  from ..models.produce_message_properties_type_0 import ProduceMessagePropertiesType0





T = TypeVar("T", bound="ProduceMessage")



@_attrs_define
class ProduceMessage:
    """ 
        Attributes:
            event_time (int | None | Unset): ms since the epoch
            key (None | str | Unset): absent or null: a key-less message
            properties (None | ProduceMessagePropertiesType0 | Unset):
            sequence_id (int | None | Unset): for deduplication
            value (None | str | Unset): absent or empty: an empty payload (a tombstone for its key)
            value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text` means: text when the
                payload is UTF-8.
     """

    event_time: int | None | Unset = UNSET
    key: None | str | Unset = UNSET
    properties: None | ProduceMessagePropertiesType0 | Unset = UNSET
    sequence_id: int | None | Unset = UNSET
    value: None | str | Unset = UNSET
    value_encoding: ValueEncoding | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.produce_message_properties_type_0 import ProduceMessagePropertiesType0 # noqa: PLC0415
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

        properties: dict[str, Any] | None | Unset
        if isinstance(self.properties, Unset):
            properties = UNSET
        elif isinstance(self.properties, ProduceMessagePropertiesType0):
            properties = self.properties.to_dict()
        else:
            properties = self.properties

        sequence_id: int | None | Unset
        if isinstance(self.sequence_id, Unset):
            sequence_id = UNSET
        else:
            sequence_id = self.sequence_id

        value: None | str | Unset
        if isinstance(self.value, Unset):
            value = UNSET
        else:
            value = self.value

        value_encoding: str | Unset = UNSET
        if not isinstance(self.value_encoding, Unset):
            value_encoding = self.value_encoding.value



        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if event_time is not UNSET:
            field_dict["event_time"] = event_time
        if key is not UNSET:
            field_dict["key"] = key
        if properties is not UNSET:
            field_dict["properties"] = properties
        if sequence_id is not UNSET:
            field_dict["sequence_id"] = sequence_id
        if value is not UNSET:
            field_dict["value"] = value
        if value_encoding is not UNSET:
            field_dict["value_encoding"] = value_encoding

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.produce_message_properties_type_0 import ProduceMessagePropertiesType0 # noqa: PLC0415
        d = dict(src_dict)
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


        def _parse_properties(data: object) -> None | ProduceMessagePropertiesType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                properties_type_0 = ProduceMessagePropertiesType0.from_dict(data)



                return properties_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProduceMessagePropertiesType0 | Unset, data)

        properties = _parse_properties(d.pop("properties", UNSET))


        def _parse_sequence_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        sequence_id = _parse_sequence_id(d.pop("sequence_id", UNSET))


        def _parse_value(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        value = _parse_value(d.pop("value", UNSET))


        _value_encoding = d.pop("value_encoding", UNSET)
        value_encoding: ValueEncoding | Unset
        if isinstance(_value_encoding,  Unset):
            value_encoding = UNSET
        else:
            value_encoding = ValueEncoding(_value_encoding)




        produce_message = cls(
            event_time=event_time,
            key=key,
            properties=properties,
            sequence_id=sequence_id,
            value=value,
            value_encoding=value_encoding,
        )


        produce_message.additional_properties = d
        return produce_message

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
