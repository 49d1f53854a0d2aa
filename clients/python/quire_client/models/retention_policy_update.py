from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="RetentionPolicyUpdate")



@_attrs_define
class RetentionPolicyUpdate:
    """ Retention as posted (topic or namespace): the fields left out keep their effective value.
    Pulsar's ranges: -1 is unlimited, 0 keeps nothing once consumed.

        Attributes:
            retention_size_in_mb (int | None | Unset):
            retention_time_in_minutes (int | None | Unset):
     """

    retention_size_in_mb: int | None | Unset = UNSET
    retention_time_in_minutes: int | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        retention_size_in_mb: int | None | Unset
        if isinstance(self.retention_size_in_mb, Unset):
            retention_size_in_mb = UNSET
        else:
            retention_size_in_mb = self.retention_size_in_mb

        retention_time_in_minutes: int | None | Unset
        if isinstance(self.retention_time_in_minutes, Unset):
            retention_time_in_minutes = UNSET
        else:
            retention_time_in_minutes = self.retention_time_in_minutes


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if retention_size_in_mb is not UNSET:
            field_dict["retentionSizeInMB"] = retention_size_in_mb
        if retention_time_in_minutes is not UNSET:
            field_dict["retentionTimeInMinutes"] = retention_time_in_minutes

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_retention_size_in_mb(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retention_size_in_mb = _parse_retention_size_in_mb(d.pop("retentionSizeInMB", UNSET))


        def _parse_retention_time_in_minutes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retention_time_in_minutes = _parse_retention_time_in_minutes(d.pop("retentionTimeInMinutes", UNSET))


        retention_policy_update = cls(
            retention_size_in_mb=retention_size_in_mb,
            retention_time_in_minutes=retention_time_in_minutes,
        )

        return retention_policy_update

