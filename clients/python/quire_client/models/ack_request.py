from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="AckRequest")



@_attrs_define
class AckRequest:
    """ Either `message_ids` (individual acks) or `cumulative` (everything up to that id).

        Attributes:
            cumulative (None | str | Unset):
            message_ids (list[str] | None | Unset):
     """

    cumulative: None | str | Unset = UNSET
    message_ids: list[str] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        cumulative: None | str | Unset
        if isinstance(self.cumulative, Unset):
            cumulative = UNSET
        else:
            cumulative = self.cumulative

        message_ids: list[str] | None | Unset
        if isinstance(self.message_ids, Unset):
            message_ids = UNSET
        elif isinstance(self.message_ids, list):
            message_ids = self.message_ids


        else:
            message_ids = self.message_ids


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if cumulative is not UNSET:
            field_dict["cumulative"] = cumulative
        if message_ids is not UNSET:
            field_dict["message_ids"] = message_ids

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_cumulative(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cumulative = _parse_cumulative(d.pop("cumulative", UNSET))


        def _parse_message_ids(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                message_ids_type_0 = cast(list[str], data)

                return message_ids_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        message_ids = _parse_message_ids(d.pop("message_ids", UNSET))


        ack_request = cls(
            cumulative=cumulative,
            message_ids=message_ids,
        )


        ack_request.additional_properties = d
        return ack_request

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
