from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.subscriptions_of_partition import SubscriptionsOfPartition





T = TypeVar("T", bound="PartitionStats")



@_attrs_define
class PartitionStats:
    """ 
        Attributes:
            backlog_size (int): bytes stored after the slowest subscription's position
            bytes_in_counter (int):
            msg_in_counter (int):
            storage_size (int):
            subscriptions (SubscriptionsOfPartition):
            average_msg_size (float | Unset):  Default: 0.0.
            bytes_out_counter (int | Unset):  Default: 0.
            msg_out_counter (int | Unset):  Default: 0.
            msg_rate_in (float | Unset): messages per second stored, over the last stats interval Default: 0.0.
            msg_rate_out (float | Unset): messages per second delivered to subscriptions and readers Default: 0.0.
            msg_throughput_in (float | Unset): bytes per second stored Default: 0.0.
            msg_throughput_out (float | Unset): bytes per second delivered Default: 0.0.
     """

    backlog_size: int
    bytes_in_counter: int
    msg_in_counter: int
    storage_size: int
    subscriptions: SubscriptionsOfPartition
    average_msg_size: float | Unset = 0.0
    bytes_out_counter: int | Unset = 0
    msg_out_counter: int | Unset = 0
    msg_rate_in: float | Unset = 0.0
    msg_rate_out: float | Unset = 0.0
    msg_throughput_in: float | Unset = 0.0
    msg_throughput_out: float | Unset = 0.0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.subscriptions_of_partition import SubscriptionsOfPartition # noqa: PLC0415
        backlog_size = self.backlog_size

        bytes_in_counter = self.bytes_in_counter

        msg_in_counter = self.msg_in_counter

        storage_size = self.storage_size

        subscriptions = self.subscriptions.to_dict()

        average_msg_size = self.average_msg_size

        bytes_out_counter = self.bytes_out_counter

        msg_out_counter = self.msg_out_counter

        msg_rate_in = self.msg_rate_in

        msg_rate_out = self.msg_rate_out

        msg_throughput_in = self.msg_throughput_in

        msg_throughput_out = self.msg_throughput_out


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "backlogSize": backlog_size,
            "bytesInCounter": bytes_in_counter,
            "msgInCounter": msg_in_counter,
            "storageSize": storage_size,
            "subscriptions": subscriptions,
        })
        if average_msg_size is not UNSET:
            field_dict["averageMsgSize"] = average_msg_size
        if bytes_out_counter is not UNSET:
            field_dict["bytesOutCounter"] = bytes_out_counter
        if msg_out_counter is not UNSET:
            field_dict["msgOutCounter"] = msg_out_counter
        if msg_rate_in is not UNSET:
            field_dict["msgRateIn"] = msg_rate_in
        if msg_rate_out is not UNSET:
            field_dict["msgRateOut"] = msg_rate_out
        if msg_throughput_in is not UNSET:
            field_dict["msgThroughputIn"] = msg_throughput_in
        if msg_throughput_out is not UNSET:
            field_dict["msgThroughputOut"] = msg_throughput_out

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.subscriptions_of_partition import SubscriptionsOfPartition # noqa: PLC0415
        d = dict(src_dict)
        backlog_size = d.pop("backlogSize")

        bytes_in_counter = d.pop("bytesInCounter")

        msg_in_counter = d.pop("msgInCounter")

        storage_size = d.pop("storageSize")

        subscriptions = SubscriptionsOfPartition.from_dict(d.pop("subscriptions"))




        average_msg_size = d.pop("averageMsgSize", UNSET)

        bytes_out_counter = d.pop("bytesOutCounter", UNSET)

        msg_out_counter = d.pop("msgOutCounter", UNSET)

        msg_rate_in = d.pop("msgRateIn", UNSET)

        msg_rate_out = d.pop("msgRateOut", UNSET)

        msg_throughput_in = d.pop("msgThroughputIn", UNSET)

        msg_throughput_out = d.pop("msgThroughputOut", UNSET)

        partition_stats = cls(
            backlog_size=backlog_size,
            bytes_in_counter=bytes_in_counter,
            msg_in_counter=msg_in_counter,
            storage_size=storage_size,
            subscriptions=subscriptions,
            average_msg_size=average_msg_size,
            bytes_out_counter=bytes_out_counter,
            msg_out_counter=msg_out_counter,
            msg_rate_in=msg_rate_in,
            msg_rate_out=msg_rate_out,
            msg_throughput_in=msg_throughput_in,
            msg_throughput_out=msg_throughput_out,
        )


        partition_stats.additional_properties = d
        return partition_stats

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
