from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.backlog_quota_policy import BacklogQuotaPolicy
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="BacklogQuota")



@_attrs_define
class BacklogQuota:
    """ Pulsar's backlog quota, as GET answers it. `destination_storage` has `limitSize`,
    `message_age` has `limitTime`; the other limit is kept as given but does not apply to that
    type. A limit that is not set is null.

        Attributes:
            policy (BacklogQuotaPolicy):
            limit_size (int | None | Unset): bytes of the slowest subscription's backlog
            limit_time (int | None | Unset): seconds: age of its oldest unacked message
     """

    policy: BacklogQuotaPolicy
    limit_size: int | None | Unset = UNSET
    limit_time: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        policy = self.policy.value

        limit_size: int | None | Unset
        if isinstance(self.limit_size, Unset):
            limit_size = UNSET
        else:
            limit_size = self.limit_size

        limit_time: int | None | Unset
        if isinstance(self.limit_time, Unset):
            limit_time = UNSET
        else:
            limit_time = self.limit_time


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "policy": policy,
        })
        if limit_size is not UNSET:
            field_dict["limitSize"] = limit_size
        if limit_time is not UNSET:
            field_dict["limitTime"] = limit_time

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        policy = BacklogQuotaPolicy(d.pop("policy"))




        def _parse_limit_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        limit_size = _parse_limit_size(d.pop("limitSize", UNSET))


        def _parse_limit_time(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        limit_time = _parse_limit_time(d.pop("limitTime", UNSET))


        backlog_quota = cls(
            policy=policy,
            limit_size=limit_size,
            limit_time=limit_time,
        )


        backlog_quota.additional_properties = d
        return backlog_quota

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
