from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset







T = TypeVar("T", bound="KafkaGroupMember")



@_attrs_define
class KafkaGroupMember:
    """ 
        Attributes:
            assignment_bytes (int): the size of the assignment the leader gave it (its format is the client's)
            client_id (str):
            member_id (str):
     """

    assignment_bytes: int
    client_id: str
    member_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        assignment_bytes = self.assignment_bytes

        client_id = self.client_id

        member_id = self.member_id


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "assignmentBytes": assignment_bytes,
            "clientId": client_id,
            "memberId": member_id,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        assignment_bytes = d.pop("assignmentBytes")

        client_id = d.pop("clientId")

        member_id = d.pop("memberId")

        kafka_group_member = cls(
            assignment_bytes=assignment_bytes,
            client_id=client_id,
            member_id=member_id,
        )


        kafka_group_member.additional_properties = d
        return kafka_group_member

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
