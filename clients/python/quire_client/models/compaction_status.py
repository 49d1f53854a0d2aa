from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.compaction_status_status import CompactionStatusStatus
from ..types import UNSET, Unset






T = TypeVar("T", bound="CompactionStatus")



@_attrs_define
class CompactionStatus:
    """ 
        Attributes:
            status (CompactionStatusStatus):
            last_error (str | Unset):  Default: ''.
     """

    status: CompactionStatusStatus
    last_error: str | Unset = ''
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        last_error = self.last_error


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "status": status,
        })
        if last_error is not UNSET:
            field_dict["lastError"] = last_error

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        status = CompactionStatusStatus(d.pop("status"))




        last_error = d.pop("lastError", UNSET)

        compaction_status = cls(
            status=status,
            last_error=last_error,
        )


        compaction_status.additional_properties = d
        return compaction_status

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
