from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






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
            lag (int | None | Unset): logEndOffset minus the committed offset (0 at least); null as logEndOffset is
            log_end_offset (int | None | Unset): the partition's high watermark (the next offset a producer gets); null when
                this broker cannot read it now (the topic is served by another broker, or gone)
     """

    commit_time_ms: int
    metadata: str
    offset: int
    partition: int
    topic: str
    lag: int | None | Unset = UNSET
    log_end_offset: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        commit_time_ms = self.commit_time_ms

        metadata = self.metadata

        offset = self.offset

        partition = self.partition

        topic = self.topic

        lag: int | None | Unset
        if isinstance(self.lag, Unset):
            lag = UNSET
        else:
            lag = self.lag

        log_end_offset: int | None | Unset
        if isinstance(self.log_end_offset, Unset):
            log_end_offset = UNSET
        else:
            log_end_offset = self.log_end_offset


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "commitTimeMs": commit_time_ms,
            "metadata": metadata,
            "offset": offset,
            "partition": partition,
            "topic": topic,
        })
        if lag is not UNSET:
            field_dict["lag"] = lag
        if log_end_offset is not UNSET:
            field_dict["logEndOffset"] = log_end_offset

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        commit_time_ms = d.pop("commitTimeMs")

        metadata = d.pop("metadata")

        offset = d.pop("offset")

        partition = d.pop("partition")

        topic = d.pop("topic")

        def _parse_lag(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lag = _parse_lag(d.pop("lag", UNSET))


        def _parse_log_end_offset(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        log_end_offset = _parse_log_end_offset(d.pop("logEndOffset", UNSET))


        kafka_group_offset = cls(
            commit_time_ms=commit_time_ms,
            metadata=metadata,
            offset=offset,
            partition=partition,
            topic=topic,
            lag=lag,
            log_end_offset=log_end_offset,
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
