from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="RetentionPolicy")



@_attrs_define
class RetentionPolicy:
    """ 
        Attributes:
            retention_size_in_mb (int):
            retention_time_in_minutes (int):
     """

    retention_size_in_mb: int
    retention_time_in_minutes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        retention_size_in_mb = self.retention_size_in_mb

        retention_time_in_minutes = self.retention_time_in_minutes


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "retentionSizeInMB": retention_size_in_mb,
            "retentionTimeInMinutes": retention_time_in_minutes,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        retention_size_in_mb = d.pop("retentionSizeInMB")

        retention_time_in_minutes = d.pop("retentionTimeInMinutes")

        retention_policy = cls(
            retention_size_in_mb=retention_size_in_mb,
            retention_time_in_minutes=retention_time_in_minutes,
        )


        retention_policy.additional_properties = d
        return retention_policy

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
