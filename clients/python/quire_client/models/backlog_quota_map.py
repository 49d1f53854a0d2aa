from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.backlog_quota import BacklogQuota





T = TypeVar("T", bound="BacklogQuotaMap")



@_attrs_define
class BacklogQuotaMap:
    """ The effective quotas by type; a type not set anywhere is left out.

        Attributes:
            destination_storage (BacklogQuota | None | Unset):
            message_age (BacklogQuota | None | Unset):
     """

    destination_storage: BacklogQuota | None | Unset = UNSET
    message_age: BacklogQuota | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.backlog_quota import BacklogQuota # noqa: PLC0415
        destination_storage: dict[str, Any] | None | Unset
        if isinstance(self.destination_storage, Unset):
            destination_storage = UNSET
        elif isinstance(self.destination_storage, BacklogQuota):
            destination_storage = self.destination_storage.to_dict()
        else:
            destination_storage = self.destination_storage

        message_age: dict[str, Any] | None | Unset
        if isinstance(self.message_age, Unset):
            message_age = UNSET
        elif isinstance(self.message_age, BacklogQuota):
            message_age = self.message_age.to_dict()
        else:
            message_age = self.message_age


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
        })
        if destination_storage is not UNSET:
            field_dict["destination_storage"] = destination_storage
        if message_age is not UNSET:
            field_dict["message_age"] = message_age

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backlog_quota import BacklogQuota # noqa: PLC0415
        d = dict(src_dict)
        def _parse_destination_storage(data: object) -> BacklogQuota | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                destination_storage_type_0 = BacklogQuota.from_dict(data)



                return destination_storage_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BacklogQuota | None | Unset, data)

        destination_storage = _parse_destination_storage(d.pop("destination_storage", UNSET))


        def _parse_message_age(data: object) -> BacklogQuota | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                message_age_type_0 = BacklogQuota.from_dict(data)



                return message_age_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BacklogQuota | None | Unset, data)

        message_age = _parse_message_age(d.pop("message_age", UNSET))


        backlog_quota_map = cls(
            destination_storage=destination_storage,
            message_age=message_age,
        )


        backlog_quota_map.additional_properties = d
        return backlog_quota_map

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
