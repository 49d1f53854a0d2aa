from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.keyless_policy import KeylessPolicy






T = TypeVar("T", bound="CompactionPolicy")



@_attrs_define
class CompactionPolicy:
    """ A topic's compaction policy: key-less messages, tombstone retention in the compacted view
    (Kafka's delete.retention.ms) and two triggers besides the threshold; 0 = off for each.

        Attributes:
            delete_retention_ms (int): a tombstone stays in the compacted view this long after it was published (0: dropped
                at once)
            keyless_policy (KeylessPolicy): What compaction does with key-less messages: drop them all, or keep them all.
            max_lag_ms (int): request a run when the oldest message after the horizon is older than this
            min_cleanable_dirty_ratio (float): request a run when the bytes after the horizon pass this share of the
                compacted view plus them
     """

    delete_retention_ms: int
    keyless_policy: KeylessPolicy
    max_lag_ms: int
    min_cleanable_dirty_ratio: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        delete_retention_ms = self.delete_retention_ms

        keyless_policy = self.keyless_policy.value

        max_lag_ms = self.max_lag_ms

        min_cleanable_dirty_ratio = self.min_cleanable_dirty_ratio


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "deleteRetentionMs": delete_retention_ms,
            "keylessPolicy": keyless_policy,
            "maxLagMs": max_lag_ms,
            "minCleanableDirtyRatio": min_cleanable_dirty_ratio,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        delete_retention_ms = d.pop("deleteRetentionMs")

        keyless_policy = KeylessPolicy(d.pop("keylessPolicy"))




        max_lag_ms = d.pop("maxLagMs")

        min_cleanable_dirty_ratio = d.pop("minCleanableDirtyRatio")

        compaction_policy = cls(
            delete_retention_ms=delete_retention_ms,
            keyless_policy=keyless_policy,
            max_lag_ms=max_lag_ms,
            min_cleanable_dirty_ratio=min_cleanable_dirty_ratio,
        )


        compaction_policy.additional_properties = d
        return compaction_policy

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
