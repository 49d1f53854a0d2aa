from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="LookupResult")



@_attrs_define
class LookupResult:
    """ 
        Attributes:
            broker_url (str): the owner's service URL (its HTTP URL: Quire's clients speak HTTP)
            http_url (str):
            kafka_url (None | str): the owner's Kafka listener, null when it has none
            native_url (None | str): the owner's Pulsar listener (Pulsar's `nativeUrl`), null when it has none
     """

    broker_url: str
    http_url: str
    kafka_url: None | str
    native_url: None | str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        broker_url = self.broker_url

        http_url = self.http_url

        kafka_url: None | str
        kafka_url = self.kafka_url

        native_url: None | str
        native_url = self.native_url


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "brokerUrl": broker_url,
            "httpUrl": http_url,
            "kafkaUrl": kafka_url,
            "nativeUrl": native_url,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        broker_url = d.pop("brokerUrl")

        http_url = d.pop("httpUrl")

        def _parse_kafka_url(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        kafka_url = _parse_kafka_url(d.pop("kafkaUrl"))


        def _parse_native_url(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        native_url = _parse_native_url(d.pop("nativeUrl"))


        lookup_result = cls(
            broker_url=broker_url,
            http_url=http_url,
            kafka_url=kafka_url,
            native_url=native_url,
        )


        lookup_result.additional_properties = d
        return lookup_result

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
