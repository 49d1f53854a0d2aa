from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
  from ..models.backlog_quota_events import BacklogQuotaEvents
  from ..models.compaction_stats import CompactionStats
  from ..models.subscriptions import Subscriptions





T = TypeVar("T", bound="TopicStats")



@_attrs_define
class TopicStats:
    """ 
        Attributes:
            backlog_size (int):
            bytes_in_counter (int):
            compaction (CompactionStats):
            msg_in_counter (int):
            storage_size (int):
            subscriptions (Subscriptions):
            backlog_quota_events (BacklogQuotaEvents | Unset): Backlog quota events of the topic since it was opened on this
                broker: produces held
                (producer_request_hold), produces refused (producer_exception, or a hold that timed out),
                cursors moved forward by consumer_backlog_eviction (one per subscription and partition).
            owner_broker (None | str | Unset): the broker that owns the topic and answered
            partitions (int | Unset): number of partitions; 0: not partitioned Default: 0.
     """

    backlog_size: int
    bytes_in_counter: int
    compaction: CompactionStats
    msg_in_counter: int
    storage_size: int
    subscriptions: Subscriptions
    backlog_quota_events: BacklogQuotaEvents | Unset = UNSET
    owner_broker: None | str | Unset = UNSET
    partitions: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.backlog_quota_events import BacklogQuotaEvents # noqa: PLC0415
        from ..models.compaction_stats import CompactionStats # noqa: PLC0415
        from ..models.subscriptions import Subscriptions # noqa: PLC0415
        backlog_size = self.backlog_size

        bytes_in_counter = self.bytes_in_counter

        compaction = self.compaction.to_dict()

        msg_in_counter = self.msg_in_counter

        storage_size = self.storage_size

        subscriptions = self.subscriptions.to_dict()

        backlog_quota_events: dict[str, Any] | Unset = UNSET
        if not isinstance(self.backlog_quota_events, Unset):
            backlog_quota_events = self.backlog_quota_events.to_dict()

        owner_broker: None | str | Unset
        if isinstance(self.owner_broker, Unset):
            owner_broker = UNSET
        else:
            owner_broker = self.owner_broker

        partitions = self.partitions


        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({
            "backlogSize": backlog_size,
            "bytesInCounter": bytes_in_counter,
            "compaction": compaction,
            "msgInCounter": msg_in_counter,
            "storageSize": storage_size,
            "subscriptions": subscriptions,
        })
        if backlog_quota_events is not UNSET:
            field_dict["backlogQuotaEvents"] = backlog_quota_events
        if owner_broker is not UNSET:
            field_dict["ownerBroker"] = owner_broker
        if partitions is not UNSET:
            field_dict["partitions"] = partitions

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backlog_quota_events import BacklogQuotaEvents # noqa: PLC0415
        from ..models.compaction_stats import CompactionStats # noqa: PLC0415
        from ..models.subscriptions import Subscriptions # noqa: PLC0415
        d = dict(src_dict)
        backlog_size = d.pop("backlogSize")

        bytes_in_counter = d.pop("bytesInCounter")

        compaction = CompactionStats.from_dict(d.pop("compaction"))




        msg_in_counter = d.pop("msgInCounter")

        storage_size = d.pop("storageSize")

        subscriptions = Subscriptions.from_dict(d.pop("subscriptions"))




        _backlog_quota_events = d.pop("backlogQuotaEvents", UNSET)
        backlog_quota_events: BacklogQuotaEvents | Unset
        if isinstance(_backlog_quota_events,  Unset):
            backlog_quota_events = UNSET
        else:
            backlog_quota_events = BacklogQuotaEvents.from_dict(_backlog_quota_events)




        def _parse_owner_broker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        owner_broker = _parse_owner_broker(d.pop("ownerBroker", UNSET))


        partitions = d.pop("partitions", UNSET)

        topic_stats = cls(
            backlog_size=backlog_size,
            bytes_in_counter=bytes_in_counter,
            compaction=compaction,
            msg_in_counter=msg_in_counter,
            storage_size=storage_size,
            subscriptions=subscriptions,
            backlog_quota_events=backlog_quota_events,
            owner_broker=owner_broker,
            partitions=partitions,
        )


        topic_stats.additional_properties = d
        return topic_stats

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
