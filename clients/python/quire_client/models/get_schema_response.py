from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.schema_properties import SchemaProperties





T = TypeVar("T", bound="GetSchemaResponse")



@_attrs_define
class GetSchemaResponse:
    """ 
        Attributes:
            data (str): the definition (empty for STRING and the other primitive types)
            timestamp (int): when it was stored (epoch ms)
            type_ (str): Pulsar's schema type
            version (int): the version (the first is 0)
            properties (SchemaProperties | Unset): the schema's properties
     """

    data: str
    timestamp: int
    type_: str
    version: int
    properties: SchemaProperties | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.schema_properties import SchemaProperties # noqa: PLC0415
        data = self.data

        timestamp = self.timestamp

        type_ = self.type_

        version = self.version

        properties: dict[str, Any] | Unset = UNSET
        if not isinstance(self.properties, Unset):
            properties = self.properties.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "data": data,
            "timestamp": timestamp,
            "type": type_,
            "version": version,
        })
        if properties is not UNSET:
            field_dict["properties"] = properties

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.schema_properties import SchemaProperties # noqa: PLC0415
        d = dict(src_dict)
        data = d.pop("data")

        timestamp = d.pop("timestamp")

        type_ = d.pop("type")

        version = d.pop("version")

        _properties = d.pop("properties", UNSET)
        properties: SchemaProperties | Unset
        if isinstance(_properties,  Unset):
            properties = UNSET
        else:
            properties = SchemaProperties.from_dict(_properties)




        get_schema_response = cls(
            data=data,
            timestamp=timestamp,
            type_=type_,
            version=version,
            properties=properties,
        )


        get_schema_response.additional_properties = d
        return get_schema_response

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
