from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.partition_last_message_ids import PartitionLastMessageIds





T = TypeVar("T", bound="TerminateResult")



@_attrs_define
class TerminateResult:
    """ 
        Attributes:
            message_id (None | str): the last message's id; null when the topic held none
            partitions (PartitionLastMessageIds | Unset): a partitioned topic: each partition's last message id (an empty
                one is left out)
     """

    message_id: None | str
    partitions: PartitionLastMessageIds | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.partition_last_message_ids import PartitionLastMessageIds # noqa: PLC0415
        message_id: None | str
        message_id = self.message_id

        partitions: dict[str, Any] | Unset = UNSET
        if not isinstance(self.partitions, Unset):
            partitions = self.partitions.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "messageId": message_id,
        })
        if partitions is not UNSET:
            field_dict["partitions"] = partitions

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.partition_last_message_ids import PartitionLastMessageIds # noqa: PLC0415
        d = dict(src_dict)
        def _parse_message_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        message_id = _parse_message_id(d.pop("messageId"))


        _partitions = d.pop("partitions", UNSET)
        partitions: PartitionLastMessageIds | Unset
        if isinstance(_partitions,  Unset):
            partitions = UNSET
        else:
            partitions = PartitionLastMessageIds.from_dict(_partitions)




        terminate_result = cls(
            message_id=message_id,
            partitions=partitions,
        )


        terminate_result.additional_properties = d
        return terminate_result

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
