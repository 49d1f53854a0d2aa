from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from typing import cast

if TYPE_CHECKING:
  from ..models.internal_stats_by_partition import InternalStatsByPartition
  from ..models.partitioned_metadata import PartitionedMetadata





T = TypeVar("T", bound="PartitionedInternalStats")



@_attrs_define
class PartitionedInternalStats:
    """ A partitioned topic's internalStats, as Pulsar's partitioned-internalStats: one entry per
    partition's managed ledger, keyed by the partition's name.

        Attributes:
            metadata (PartitionedMetadata):
            partitions (InternalStatsByPartition):
     """

    metadata: PartitionedMetadata
    partitions: InternalStatsByPartition
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.internal_stats_by_partition import InternalStatsByPartition # noqa: PLC0415
        from ..models.partitioned_metadata import PartitionedMetadata # noqa: PLC0415
        metadata = self.metadata.to_dict()

        partitions = self.partitions.to_dict()


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "metadata": metadata,
            "partitions": partitions,
        })

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.internal_stats_by_partition import InternalStatsByPartition # noqa: PLC0415
        from ..models.partitioned_metadata import PartitionedMetadata # noqa: PLC0415
        d = dict(src_dict)
        metadata = PartitionedMetadata.from_dict(d.pop("metadata"))




        partitions = InternalStatsByPartition.from_dict(d.pop("partitions"))




        partitioned_internal_stats = cls(
            metadata=metadata,
            partitions=partitions,
        )


        partitioned_internal_stats.additional_properties = d
        return partitioned_internal_stats

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
