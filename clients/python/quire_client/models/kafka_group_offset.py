from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="KafkaGroupOffset")



@_attrs_define
class KafkaGroupOffset:
    """ 
        Attributes:
            commit_time_ms (int): epoch ms
            metadata (str): what the client stored with the commit
            offset (int): the committed offset: the next one the group consumes
            partition (int): the partition (0 for a topic that is not partitioned)
            topic (str): the Quire topic
     """

    commit_time_ms: int
    metadata: str
    offset: int
    partition: int
    topic: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        commit_time_ms = self.commit_time_ms

        metadata = self.metadata

        offset = self.offset

        partition = self.partition

        topic = self.topic


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "commitTimeMs": commit_time_ms,
            "metadata": metadata,
            "offset": offset,
            "partition": partition,
            "topic": topic,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        commit_time_ms = d.pop("commitTimeMs")

        metadata = d.pop("metadata")

        offset = d.pop("offset")

        partition = d.pop("partition")

        topic = d.pop("topic")

        kafka_group_offset = cls(
            commit_time_ms=commit_time_ms,
            metadata=metadata,
            offset=offset,
            partition=partition,
            topic=topic,
        )


        kafka_group_offset.additional_properties = d
        return kafka_group_offset

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
