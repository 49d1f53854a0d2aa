from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset






T = TypeVar("T", bound="BacklogQuotaEvents")



@_attrs_define
class BacklogQuotaEvents:
    """ Backlog quota events of the topic since it was opened on this broker: produces held
    (producer_request_hold), produces refused (producer_exception, or a hold that timed out),
    cursors moved forward by consumer_backlog_eviction (one per subscription and partition).

        Attributes:
            evicted (int | Unset):  Default: 0.
            held (int | Unset):  Default: 0.
            refused (int | Unset):  Default: 0.
     """

    evicted: int | Unset = 0
    held: int | Unset = 0
    refused: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        evicted = self.evicted

        held = self.held

        refused = self.refused


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if evicted is not UNSET:
            field_dict["evicted"] = evicted
        if held is not UNSET:
            field_dict["held"] = held
        if refused is not UNSET:
            field_dict["refused"] = refused

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        evicted = d.pop("evicted", UNSET)

        held = d.pop("held", UNSET)

        refused = d.pop("refused", UNSET)

        backlog_quota_events = cls(
            evicted=evicted,
            held=held,
            refused=refused,
        )


        backlog_quota_events.additional_properties = d
        return backlog_quota_events

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
