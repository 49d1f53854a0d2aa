from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.backlog_quota_update_policy_type_0 import BacklogQuotaUpdatePolicyType0
from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="BacklogQuotaUpdate")



@_attrs_define
class BacklogQuotaUpdate:
    """ A backlog quota as posted, in Pulsar's ranges (what pulsar-admin sends): `limitSize` -1 and
    a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the value
    of the quota of that type in effect (the scope's own, else the namespace's); with none in
    effect, `policy` and the type's own limit are needed.

        Attributes:
            limit_size (int | None | Unset): bytes of the slowest subscription's backlog; -1: no size limit
            limit_time (int | None | Unset): seconds: age of its oldest unacked message; 0 or less: no time limit
            policy (BacklogQuotaUpdatePolicyType0 | None | Unset):
     """

    limit_size: int | None | Unset = UNSET
    limit_time: int | None | Unset = UNSET
    policy: BacklogQuotaUpdatePolicyType0 | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
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

        policy: None | str | Unset
        if isinstance(self.policy, Unset):
            policy = UNSET
        elif isinstance(self.policy, BacklogQuotaUpdatePolicyType0):
            policy = self.policy.value
        else:
            policy = self.policy


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if limit_size is not UNSET:
            field_dict["limitSize"] = limit_size
        if limit_time is not UNSET:
            field_dict["limitTime"] = limit_time
        if policy is not UNSET:
            field_dict["policy"] = policy

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
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


        def _parse_policy(data: object) -> BacklogQuotaUpdatePolicyType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                policy_type_0 = BacklogQuotaUpdatePolicyType0(data)



                return policy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BacklogQuotaUpdatePolicyType0 | None | Unset, data)

        policy = _parse_policy(d.pop("policy", UNSET))


        backlog_quota_update = cls(
            limit_size=limit_size,
            limit_time=limit_time,
            policy=policy,
        )

        return backlog_quota_update

