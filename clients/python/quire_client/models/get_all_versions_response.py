from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.get_schema_response import GetSchemaResponse





T = TypeVar("T", bound="GetAllVersionsResponse")



@_attrs_define
class GetAllVersionsResponse:
    """ 
        Attributes:
            get_schema_responses (list[GetSchemaResponse]): every live version, oldest first
     """

    get_schema_responses: list[GetSchemaResponse]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.get_schema_response import GetSchemaResponse # noqa: PLC0415
        get_schema_responses = []
        for get_schema_responses_item_data in self.get_schema_responses:
            get_schema_responses_item = get_schema_responses_item_data.to_dict()
            get_schema_responses.append(get_schema_responses_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "getSchemaResponses": get_schema_responses,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.get_schema_response import GetSchemaResponse # noqa: PLC0415
        d = dict(src_dict)
        get_schema_responses = []
        _get_schema_responses = d.pop("getSchemaResponses")
        for get_schema_responses_item_data in (_get_schema_responses):
            get_schema_responses_item = GetSchemaResponse.from_dict(get_schema_responses_item_data)



            get_schema_responses.append(get_schema_responses_item)


        get_all_versions_response = cls(
            get_schema_responses=get_schema_responses,
        )


        get_all_versions_response.additional_properties = d
        return get_all_versions_response

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
