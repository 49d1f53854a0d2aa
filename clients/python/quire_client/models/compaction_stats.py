from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset






T = TypeVar("T", bound="CompactionStats")



@_attrs_define
class CompactionStats:
    """ 
        Attributes:
            last_compaction_duration_time_in_mills (int | Unset):  Default: 0.
            last_compaction_failed_timestamp (int | Unset):  Default: 0.
            last_compaction_removed_event_count (int | Unset):  Default: 0.
            last_compaction_succeed_timestamp (int | Unset):  Default: 0.
     """

    last_compaction_duration_time_in_mills: int | Unset = 0
    last_compaction_failed_timestamp: int | Unset = 0
    last_compaction_removed_event_count: int | Unset = 0
    last_compaction_succeed_timestamp: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        last_compaction_duration_time_in_mills = self.last_compaction_duration_time_in_mills

        last_compaction_failed_timestamp = self.last_compaction_failed_timestamp

        last_compaction_removed_event_count = self.last_compaction_removed_event_count

        last_compaction_succeed_timestamp = self.last_compaction_succeed_timestamp


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if last_compaction_duration_time_in_mills is not UNSET:
            field_dict["lastCompactionDurationTimeInMills"] = last_compaction_duration_time_in_mills
        if last_compaction_failed_timestamp is not UNSET:
            field_dict["lastCompactionFailedTimestamp"] = last_compaction_failed_timestamp
        if last_compaction_removed_event_count is not UNSET:
            field_dict["lastCompactionRemovedEventCount"] = last_compaction_removed_event_count
        if last_compaction_succeed_timestamp is not UNSET:
            field_dict["lastCompactionSucceedTimestamp"] = last_compaction_succeed_timestamp

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        last_compaction_duration_time_in_mills = d.pop("lastCompactionDurationTimeInMills", UNSET)

        last_compaction_failed_timestamp = d.pop("lastCompactionFailedTimestamp", UNSET)

        last_compaction_removed_event_count = d.pop("lastCompactionRemovedEventCount", UNSET)

        last_compaction_succeed_timestamp = d.pop("lastCompactionSucceedTimestamp", UNSET)

        compaction_stats = cls(
            last_compaction_duration_time_in_mills=last_compaction_duration_time_in_mills,
            last_compaction_failed_timestamp=last_compaction_failed_timestamp,
            last_compaction_removed_event_count=last_compaction_removed_event_count,
            last_compaction_succeed_timestamp=last_compaction_succeed_timestamp,
        )


        compaction_stats.additional_properties = d
        return compaction_stats

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
