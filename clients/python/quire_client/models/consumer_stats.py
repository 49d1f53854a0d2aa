from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="ConsumerStats")



@_attrs_define
class ConsumerStats:
    """ 
        Attributes:
            average_msg_size (float):
            bytes_counter (int):
            connected_since (int): when it was first heard (ms since the epoch)
            consumer_name (None | str): its consumer_id; null: requests that sent none
            last_seen_timestamp (int): when it was last heard (ms since the epoch)
            msg_counter (int): messages produced (or delivered) since it was first heard
            msg_rate_out (float):
            msg_throughput_out (float):
     """

    average_msg_size: float
    bytes_counter: int
    connected_since: int
    consumer_name: None | str
    last_seen_timestamp: int
    msg_counter: int
    msg_rate_out: float
    msg_throughput_out: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        average_msg_size = self.average_msg_size

        bytes_counter = self.bytes_counter

        connected_since = self.connected_since

        consumer_name: None | str
        consumer_name = self.consumer_name

        last_seen_timestamp = self.last_seen_timestamp

        msg_counter = self.msg_counter

        msg_rate_out = self.msg_rate_out

        msg_throughput_out = self.msg_throughput_out


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "averageMsgSize": average_msg_size,
            "bytesCounter": bytes_counter,
            "connectedSince": connected_since,
            "consumerName": consumer_name,
            "lastSeenTimestamp": last_seen_timestamp,
            "msgCounter": msg_counter,
            "msgRateOut": msg_rate_out,
            "msgThroughputOut": msg_throughput_out,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        average_msg_size = d.pop("averageMsgSize")

        bytes_counter = d.pop("bytesCounter")

        connected_since = d.pop("connectedSince")

        def _parse_consumer_name(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        consumer_name = _parse_consumer_name(d.pop("consumerName"))


        last_seen_timestamp = d.pop("lastSeenTimestamp")

        msg_counter = d.pop("msgCounter")

        msg_rate_out = d.pop("msgRateOut")

        msg_throughput_out = d.pop("msgThroughputOut")

        consumer_stats = cls(
            average_msg_size=average_msg_size,
            bytes_counter=bytes_counter,
            connected_since=connected_since,
            consumer_name=consumer_name,
            last_seen_timestamp=last_seen_timestamp,
            msg_counter=msg_counter,
            msg_rate_out=msg_rate_out,
            msg_throughput_out=msg_throughput_out,
        )


        consumer_stats.additional_properties = d
        return consumer_stats

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
