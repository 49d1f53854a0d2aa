from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.subscription_request_initial_position import SubscriptionRequestInitialPosition
from ..models.subscription_request_type import SubscriptionRequestType
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="SubscriptionRequest")



@_attrs_define
class SubscriptionRequest:
    """ 
        Attributes:
            ack_timeout_ms (int | None | Unset): default: the broker's
            dead_letter_topic (None | str | Unset): tenant/namespace/topic; default: {topic}-{subscription}-DLQ
            initial_position (SubscriptionRequestInitialPosition | Unset):  Default:
                SubscriptionRequestInitialPosition.LATEST.
            max_redeliveries (int | Unset): a message is delivered at most max_redeliveries + 1 times, then written to the
                dead-letter topic and acked here; 0: no limit Default: 0.
            read_compacted (bool | Unset):  Default: False.
            type_ (SubscriptionRequestType | Unset): shared: any consumer; exclusive: one consumer_id; failover: one active
                consumer, the next takes over when it goes silent; key_shared: each key to one consumer, in order. All but
                shared need consumer_id when receiving. Default: SubscriptionRequestType.SHARED.
     """

    ack_timeout_ms: int | None | Unset = UNSET
    dead_letter_topic: None | str | Unset = UNSET
    initial_position: SubscriptionRequestInitialPosition | Unset = SubscriptionRequestInitialPosition.LATEST
    max_redeliveries: int | Unset = 0
    read_compacted: bool | Unset = False
    type_: SubscriptionRequestType | Unset = SubscriptionRequestType.SHARED





    def to_dict(self) -> dict[str, Any]:
        ack_timeout_ms: int | None | Unset
        if isinstance(self.ack_timeout_ms, Unset):
            ack_timeout_ms = UNSET
        else:
            ack_timeout_ms = self.ack_timeout_ms

        dead_letter_topic: None | str | Unset
        if isinstance(self.dead_letter_topic, Unset):
            dead_letter_topic = UNSET
        else:
            dead_letter_topic = self.dead_letter_topic

        initial_position: str | Unset = UNSET
        if not isinstance(self.initial_position, Unset):
            initial_position = self.initial_position.value


        max_redeliveries = self.max_redeliveries

        read_compacted = self.read_compacted

        type_: str | Unset = UNSET
        if not isinstance(self.type_, Unset):
            type_ = self.type_.value



        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if ack_timeout_ms is not UNSET:
            field_dict["ack_timeout_ms"] = ack_timeout_ms
        if dead_letter_topic is not UNSET:
            field_dict["dead_letter_topic"] = dead_letter_topic
        if initial_position is not UNSET:
            field_dict["initial_position"] = initial_position
        if max_redeliveries is not UNSET:
            field_dict["max_redeliveries"] = max_redeliveries
        if read_compacted is not UNSET:
            field_dict["read_compacted"] = read_compacted
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_ack_timeout_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ack_timeout_ms = _parse_ack_timeout_ms(d.pop("ack_timeout_ms", UNSET))


        def _parse_dead_letter_topic(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        dead_letter_topic = _parse_dead_letter_topic(d.pop("dead_letter_topic", UNSET))


        _initial_position = d.pop("initial_position", UNSET)
        initial_position: SubscriptionRequestInitialPosition | Unset
        if isinstance(_initial_position,  Unset):
            initial_position = UNSET
        else:
            initial_position = SubscriptionRequestInitialPosition(_initial_position)




        max_redeliveries = d.pop("max_redeliveries", UNSET)

        read_compacted = d.pop("read_compacted", UNSET)

        _type_ = d.pop("type", UNSET)
        type_: SubscriptionRequestType | Unset
        if isinstance(_type_,  Unset):
            type_ = UNSET
        else:
            type_ = SubscriptionRequestType(_type_)




        subscription_request = cls(
            ack_timeout_ms=ack_timeout_ms,
            dead_letter_topic=dead_letter_topic,
            initial_position=initial_position,
            max_redeliveries=max_redeliveries,
            read_compacted=read_compacted,
            type_=type_,
        )

        return subscription_request

