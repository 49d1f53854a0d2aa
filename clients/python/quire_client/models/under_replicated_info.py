from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast






T = TypeVar("T", bound="UnderReplicatedInfo")



@_attrs_define
class UnderReplicatedInfo:
    """ 
        Attributes:
            ledger_id (int):
            missing_replicas (list[str]): bookies (lost or being decommissioned) whose copies of the ledger are being
                replaced
     """

    ledger_id: int
    missing_replicas: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        ledger_id = self.ledger_id

        missing_replicas = self.missing_replicas




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "ledgerId": ledger_id,
            "missingReplicas": missing_replicas,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ledger_id = d.pop("ledgerId")

        missing_replicas = cast(list[str], d.pop("missingReplicas"))


        under_replicated_info = cls(
            ledger_id=ledger_id,
            missing_replicas=missing_replicas,
        )


        under_replicated_info.additional_properties = d
        return under_replicated_info

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
