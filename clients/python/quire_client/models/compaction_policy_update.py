from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.keyless_policy import KeylessPolicy
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="CompactionPolicyUpdate")



@_attrs_define
class CompactionPolicyUpdate:
    """ A compaction policy as posted: the fields left out (or null) keep the scope's own value,
    else the next level's (topic > namespace > settings). Types are strict: `"5"` is not 5.

        Attributes:
            delete_retention_ms (int | None | Unset):
            keyless_policy (KeylessPolicy | None | Unset):
            max_lag_ms (int | None | Unset):
            min_cleanable_dirty_ratio (float | None | Unset):
     """

    delete_retention_ms: int | None | Unset = UNSET
    keyless_policy: KeylessPolicy | None | Unset = UNSET
    max_lag_ms: int | None | Unset = UNSET
    min_cleanable_dirty_ratio: float | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        delete_retention_ms: int | None | Unset
        if isinstance(self.delete_retention_ms, Unset):
            delete_retention_ms = UNSET
        else:
            delete_retention_ms = self.delete_retention_ms

        keyless_policy: None | str | Unset
        if isinstance(self.keyless_policy, Unset):
            keyless_policy = UNSET
        elif isinstance(self.keyless_policy, KeylessPolicy):
            keyless_policy = self.keyless_policy.value
        else:
            keyless_policy = self.keyless_policy

        max_lag_ms: int | None | Unset
        if isinstance(self.max_lag_ms, Unset):
            max_lag_ms = UNSET
        else:
            max_lag_ms = self.max_lag_ms

        min_cleanable_dirty_ratio: float | None | Unset
        if isinstance(self.min_cleanable_dirty_ratio, Unset):
            min_cleanable_dirty_ratio = UNSET
        else:
            min_cleanable_dirty_ratio = self.min_cleanable_dirty_ratio


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if delete_retention_ms is not UNSET:
            field_dict["deleteRetentionMs"] = delete_retention_ms
        if keyless_policy is not UNSET:
            field_dict["keylessPolicy"] = keyless_policy
        if max_lag_ms is not UNSET:
            field_dict["maxLagMs"] = max_lag_ms
        if min_cleanable_dirty_ratio is not UNSET:
            field_dict["minCleanableDirtyRatio"] = min_cleanable_dirty_ratio

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_delete_retention_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delete_retention_ms = _parse_delete_retention_ms(d.pop("deleteRetentionMs", UNSET))


        def _parse_keyless_policy(data: object) -> KeylessPolicy | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                keyless_policy_type_0 = KeylessPolicy(data)



                return keyless_policy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(KeylessPolicy | None | Unset, data)

        keyless_policy = _parse_keyless_policy(d.pop("keylessPolicy", UNSET))


        def _parse_max_lag_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_lag_ms = _parse_max_lag_ms(d.pop("maxLagMs", UNSET))


        def _parse_min_cleanable_dirty_ratio(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_cleanable_dirty_ratio = _parse_min_cleanable_dirty_ratio(d.pop("minCleanableDirtyRatio", UNSET))


        compaction_policy_update = cls(
            delete_retention_ms=delete_retention_ms,
            keyless_policy=keyless_policy,
            max_lag_ms=max_lag_ms,
            min_cleanable_dirty_ratio=min_cleanable_dirty_ratio,
        )

        return compaction_policy_update

