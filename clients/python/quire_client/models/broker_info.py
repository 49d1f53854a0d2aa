from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="BrokerInfo")



@_attrs_define
class BrokerInfo:
    """ 
        Attributes:
            broker_id (str):
            http_url (str):
            lease_expires_ms (int): when the broker's lease ends unless it renews it (epoch ms)
            owned_topics (int):
     """

    broker_id: str
    http_url: str
    lease_expires_ms: int
    owned_topics: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        broker_id = self.broker_id

        http_url = self.http_url

        lease_expires_ms = self.lease_expires_ms

        owned_topics = self.owned_topics


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "brokerId": broker_id,
            "httpUrl": http_url,
            "leaseExpiresMs": lease_expires_ms,
            "ownedTopics": owned_topics,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        broker_id = d.pop("brokerId")

        http_url = d.pop("httpUrl")

        lease_expires_ms = d.pop("leaseExpiresMs")

        owned_topics = d.pop("ownedTopics")

        broker_info = cls(
            broker_id=broker_id,
            http_url=http_url,
            lease_expires_ms=lease_expires_ms,
            owned_topics=owned_topics,
        )


        broker_info.additional_properties = d
        return broker_info

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
