from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.bookie_info import BookieInfo





T = TypeVar("T", bound="BookieList")



@_attrs_define
class BookieList:
    """ 
        Attributes:
            bookies (list[BookieInfo]):
     """

    bookies: list[BookieInfo]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.bookie_info import BookieInfo # noqa: PLC0415
        bookies = []
        for bookies_item_data in self.bookies:
            bookies_item = bookies_item_data.to_dict()
            bookies.append(bookies_item)




        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "bookies": bookies,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.bookie_info import BookieInfo # noqa: PLC0415
        d = dict(src_dict)
        bookies = []
        _bookies = d.pop("bookies")
        for bookies_item_data in (_bookies):
            bookies_item = BookieInfo.from_dict(bookies_item_data)



            bookies.append(bookies_item)


        bookie_list = cls(
            bookies=bookies,
        )


        bookie_list.additional_properties = d
        return bookie_list

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
