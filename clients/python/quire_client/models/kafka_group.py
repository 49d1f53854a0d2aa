from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.kafka_group_state_type_0 import KafkaGroupStateType0
from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.kafka_group_member import KafkaGroupMember
  from ..models.kafka_group_offset import KafkaGroupOffset





T = TypeVar("T", bound="KafkaGroup")



@_attrs_define
class KafkaGroup:
    """ 
        Attributes:
            group (str):
            offsets (list[KafkaGroupOffset]):
            generation (int | None | Unset): null as state is
            leader (None | str | Unset): the leader's member id
            members (list[KafkaGroupMember] | None | Unset): null as state is
            protocol (None | str | Unset): the assignor the members use
            state (KafkaGroupStateType0 | None | Unset): the group's state on its coordinator; null when this broker does
                not hold it
     """

    group: str
    offsets: list[KafkaGroupOffset]
    generation: int | None | Unset = UNSET
    leader: None | str | Unset = UNSET
    members: list[KafkaGroupMember] | None | Unset = UNSET
    protocol: None | str | Unset = UNSET
    state: KafkaGroupStateType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.kafka_group_member import KafkaGroupMember # noqa: PLC0415
        from ..models.kafka_group_offset import KafkaGroupOffset # noqa: PLC0415
        group = self.group

        offsets = []
        for offsets_item_data in self.offsets:
            offsets_item = offsets_item_data.to_dict()
            offsets.append(offsets_item)



        generation: int | None | Unset
        if isinstance(self.generation, Unset):
            generation = UNSET
        else:
            generation = self.generation

        leader: None | str | Unset
        if isinstance(self.leader, Unset):
            leader = UNSET
        else:
            leader = self.leader

        members: list[dict[str, Any]] | None | Unset
        if isinstance(self.members, Unset):
            members = UNSET
        elif isinstance(self.members, list):
            members = []
            for members_type_0_item_data in self.members:
                members_type_0_item = members_type_0_item_data.to_dict()
                members.append(members_type_0_item)


        else:
            members = self.members

        protocol: None | str | Unset
        if isinstance(self.protocol, Unset):
            protocol = UNSET
        else:
            protocol = self.protocol

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, KafkaGroupStateType0):
            state = self.state.value
        else:
            state = self.state


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "group": group,
            "offsets": offsets,
        })
        if generation is not UNSET:
            field_dict["generation"] = generation
        if leader is not UNSET:
            field_dict["leader"] = leader
        if members is not UNSET:
            field_dict["members"] = members
        if protocol is not UNSET:
            field_dict["protocol"] = protocol
        if state is not UNSET:
            field_dict["state"] = state

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.kafka_group_member import KafkaGroupMember # noqa: PLC0415
        from ..models.kafka_group_offset import KafkaGroupOffset # noqa: PLC0415
        d = dict(src_dict)
        group = d.pop("group")

        offsets = []
        _offsets = d.pop("offsets")
        for offsets_item_data in (_offsets):
            offsets_item = KafkaGroupOffset.from_dict(offsets_item_data)



            offsets.append(offsets_item)


        def _parse_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        generation = _parse_generation(d.pop("generation", UNSET))


        def _parse_leader(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        leader = _parse_leader(d.pop("leader", UNSET))


        def _parse_members(data: object) -> list[KafkaGroupMember] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                members_type_0 = []
                _members_type_0 = data
                for members_type_0_item_data in (_members_type_0):
                    members_type_0_item = KafkaGroupMember.from_dict(members_type_0_item_data)



                    members_type_0.append(members_type_0_item)

                return members_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[KafkaGroupMember] | None | Unset, data)

        members = _parse_members(d.pop("members", UNSET))


        def _parse_protocol(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        protocol = _parse_protocol(d.pop("protocol", UNSET))


        def _parse_state(data: object) -> KafkaGroupStateType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_type_0 = KafkaGroupStateType0(data)



                return state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(KafkaGroupStateType0 | None | Unset, data)

        state = _parse_state(d.pop("state", UNSET))


        kafka_group = cls(
            group=group,
            offsets=offsets,
            generation=generation,
            leader=leader,
            members=members,
            protocol=protocol,
            state=state,
        )


        kafka_group.additional_properties = d
        return kafka_group

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
