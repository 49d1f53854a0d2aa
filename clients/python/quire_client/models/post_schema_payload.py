from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.post_schema_payload_type import PostSchemaPayloadType
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.post_schema_properties import PostSchemaProperties





T = TypeVar("T", bound="PostSchemaPayload")



@_attrs_define
class PostSchemaPayload:
    """ 
        Attributes:
            type_ (PostSchemaPayloadType): Pulsar's schema type
            properties (PostSchemaProperties | Unset): the schema's properties
            schema (str | Unset): the definition (an Avro record for AVRO and JSON) Default: ''.
     """

    type_: PostSchemaPayloadType
    properties: PostSchemaProperties | Unset = UNSET
    schema: str | Unset = ''
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.post_schema_properties import PostSchemaProperties # noqa: PLC0415
        type_ = self.type_.value

        properties: dict[str, Any] | Unset = UNSET
        if not isinstance(self.properties, Unset):
            properties = self.properties.to_dict()

        schema = self.schema


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "type": type_,
        })
        if properties is not UNSET:
            field_dict["properties"] = properties
        if schema is not UNSET:
            field_dict["schema"] = schema

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.post_schema_properties import PostSchemaProperties # noqa: PLC0415
        d = dict(src_dict)
        type_ = PostSchemaPayloadType(d.pop("type"))




        _properties = d.pop("properties", UNSET)
        properties: PostSchemaProperties | Unset
        if isinstance(_properties,  Unset):
            properties = UNSET
        else:
            properties = PostSchemaProperties.from_dict(_properties)




        schema = d.pop("schema", UNSET)

        post_schema_payload = cls(
            type_=type_,
            properties=properties,
            schema=schema,
        )


        post_schema_payload.additional_properties = d
        return post_schema_payload

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
