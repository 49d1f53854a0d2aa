from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="Tenant")



@_attrs_define
class Tenant:
    """ 
        Attributes:
            name (str):
            namespaces (list[str]):
            admin_roles (list[str] | Unset):
            allowed_clusters (list[str] | Unset):
     """

    name: str
    namespaces: list[str]
    admin_roles: list[str] | Unset = UNSET
    allowed_clusters: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        name = self.name

        namespaces = self.namespaces



        admin_roles: list[str] | Unset = UNSET
        if not isinstance(self.admin_roles, Unset):
            admin_roles = self.admin_roles



        allowed_clusters: list[str] | Unset = UNSET
        if not isinstance(self.allowed_clusters, Unset):
            allowed_clusters = self.allowed_clusters




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "name": name,
            "namespaces": namespaces,
        })
        if admin_roles is not UNSET:
            field_dict["adminRoles"] = admin_roles
        if allowed_clusters is not UNSET:
            field_dict["allowedClusters"] = allowed_clusters

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        namespaces = cast(list[str], d.pop("namespaces"))


        admin_roles = cast(list[str], d.pop("adminRoles", UNSET))


        allowed_clusters = cast(list[str], d.pop("allowedClusters", UNSET))


        tenant = cls(
            name=name,
            namespaces=namespaces,
            admin_roles=admin_roles,
            allowed_clusters=allowed_clusters,
        )


        tenant.additional_properties = d
        return tenant

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
