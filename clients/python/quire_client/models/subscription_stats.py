from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.consumer_stats import ConsumerStats





T = TypeVar("T", bound="SubscriptionStats")



@_attrs_define
class SubscriptionStats:
    """ 
        Attributes:
            msg_backlog (int): messages not acked, delivered or not (not entries)
            type_ (str):
            unacked_messages (int): messages delivered and not acked yet
            bytes_out_counter (int | Unset):  Default: 0.
            consumers (list[ConsumerStats] | Unset):
            msg_dead_lettered (int | Unset): messages written to its dead-letter topic Default: 0.
            msg_out_counter (int | Unset):  Default: 0.
            msg_rate_expired (float | Unset):  Default: 0.0.
            msg_rate_out (float | Unset):  Default: 0.0.
            msg_rate_redeliver (float | Unset):  Default: 0.0.
            msg_redeliver_counter (int | Unset):  Default: 0.
            msg_throughput_out (float | Unset):  Default: 0.0.
            total_msg_expired (int | Unset):  Default: 0.
     """

    msg_backlog: int
    type_: str
    unacked_messages: int
    bytes_out_counter: int | Unset = 0
    consumers: list[ConsumerStats] | Unset = UNSET
    msg_dead_lettered: int | Unset = 0
    msg_out_counter: int | Unset = 0
    msg_rate_expired: float | Unset = 0.0
    msg_rate_out: float | Unset = 0.0
    msg_rate_redeliver: float | Unset = 0.0
    msg_redeliver_counter: int | Unset = 0
    msg_throughput_out: float | Unset = 0.0
    total_msg_expired: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.consumer_stats import ConsumerStats # noqa: PLC0415
        msg_backlog = self.msg_backlog

        type_ = self.type_

        unacked_messages = self.unacked_messages

        bytes_out_counter = self.bytes_out_counter

        consumers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.consumers, Unset):
            consumers = []
            for consumers_item_data in self.consumers:
                consumers_item = consumers_item_data.to_dict()
                consumers.append(consumers_item)



        msg_dead_lettered = self.msg_dead_lettered

        msg_out_counter = self.msg_out_counter

        msg_rate_expired = self.msg_rate_expired

        msg_rate_out = self.msg_rate_out

        msg_rate_redeliver = self.msg_rate_redeliver

        msg_redeliver_counter = self.msg_redeliver_counter

        msg_throughput_out = self.msg_throughput_out

        total_msg_expired = self.total_msg_expired


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "msgBacklog": msg_backlog,
            "type": type_,
            "unackedMessages": unacked_messages,
        })
        if bytes_out_counter is not UNSET:
            field_dict["bytesOutCounter"] = bytes_out_counter
        if consumers is not UNSET:
            field_dict["consumers"] = consumers
        if msg_dead_lettered is not UNSET:
            field_dict["msgDeadLettered"] = msg_dead_lettered
        if msg_out_counter is not UNSET:
            field_dict["msgOutCounter"] = msg_out_counter
        if msg_rate_expired is not UNSET:
            field_dict["msgRateExpired"] = msg_rate_expired
        if msg_rate_out is not UNSET:
            field_dict["msgRateOut"] = msg_rate_out
        if msg_rate_redeliver is not UNSET:
            field_dict["msgRateRedeliver"] = msg_rate_redeliver
        if msg_redeliver_counter is not UNSET:
            field_dict["msgRedeliverCounter"] = msg_redeliver_counter
        if msg_throughput_out is not UNSET:
            field_dict["msgThroughputOut"] = msg_throughput_out
        if total_msg_expired is not UNSET:
            field_dict["totalMsgExpired"] = total_msg_expired

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.consumer_stats import ConsumerStats # noqa: PLC0415
        d = dict(src_dict)
        msg_backlog = d.pop("msgBacklog")

        type_ = d.pop("type")

        unacked_messages = d.pop("unackedMessages")

        bytes_out_counter = d.pop("bytesOutCounter", UNSET)

        _consumers = d.pop("consumers", UNSET)
        consumers: list[ConsumerStats] | Unset = UNSET
        if _consumers is not UNSET:
            consumers = []
            for consumers_item_data in _consumers:
                consumers_item = ConsumerStats.from_dict(consumers_item_data)



                consumers.append(consumers_item)


        msg_dead_lettered = d.pop("msgDeadLettered", UNSET)

        msg_out_counter = d.pop("msgOutCounter", UNSET)

        msg_rate_expired = d.pop("msgRateExpired", UNSET)

        msg_rate_out = d.pop("msgRateOut", UNSET)

        msg_rate_redeliver = d.pop("msgRateRedeliver", UNSET)

        msg_redeliver_counter = d.pop("msgRedeliverCounter", UNSET)

        msg_throughput_out = d.pop("msgThroughputOut", UNSET)

        total_msg_expired = d.pop("totalMsgExpired", UNSET)

        subscription_stats = cls(
            msg_backlog=msg_backlog,
            type_=type_,
            unacked_messages=unacked_messages,
            bytes_out_counter=bytes_out_counter,
            consumers=consumers,
            msg_dead_lettered=msg_dead_lettered,
            msg_out_counter=msg_out_counter,
            msg_rate_expired=msg_rate_expired,
            msg_rate_out=msg_rate_out,
            msg_rate_redeliver=msg_rate_redeliver,
            msg_redeliver_counter=msg_redeliver_counter,
            msg_throughput_out=msg_throughput_out,
            total_msg_expired=total_msg_expired,
        )


        subscription_stats.additional_properties = d
        return subscription_stats

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
