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
  from ..models.publisher_stats import PublisherStats
  from ..models.subscriptions import Subscriptions





T = TypeVar("T", bound="TopicStats")



@_attrs_define
class TopicStats:
    """ 
        Attributes:
            backlog_size (int): bytes stored after the slowest subscription's position
            bytes_in_counter (int):
            compaction (CompactionStats):
            msg_in_counter (int):
            storage_size (int):
            subscriptions (Subscriptions):
            average_msg_size (float | Unset):  Default: 0.0.
            backlog_quota_events (BacklogQuotaEvents | Unset): Backlog quota events of the topic since it was opened on this
                broker: produces held
                (producer_request_hold), produces refused (producer_exception, or a hold that timed out),
                cursors moved forward by consumer_backlog_eviction (one per subscription and partition).
            bytes_out_counter (int | Unset):  Default: 0.
            msg_out_counter (int | Unset):  Default: 0.
            msg_rate_in (float | Unset): messages per second stored, over the last stats interval Default: 0.0.
            msg_rate_out (float | Unset): messages per second delivered to subscriptions and readers Default: 0.0.
            msg_throughput_in (float | Unset): bytes per second stored Default: 0.0.
            msg_throughput_out (float | Unset): bytes per second delivered Default: 0.0.
            owner_broker (None | str | Unset): the broker that owns the topic and answered
            partitions (int | Unset): number of partitions; 0: not partitioned Default: 0.
            publishers (list[PublisherStats] | Unset):
     """

    backlog_size: int
    bytes_in_counter: int
    compaction: CompactionStats
    msg_in_counter: int
    storage_size: int
    subscriptions: Subscriptions
    average_msg_size: float | Unset = 0.0
    backlog_quota_events: BacklogQuotaEvents | Unset = UNSET
    bytes_out_counter: int | Unset = 0
    msg_out_counter: int | Unset = 0
    msg_rate_in: float | Unset = 0.0
    msg_rate_out: float | Unset = 0.0
    msg_throughput_in: float | Unset = 0.0
    msg_throughput_out: float | Unset = 0.0
    owner_broker: None | str | Unset = UNSET
    partitions: int | Unset = 0
    publishers: list[PublisherStats] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)





    def to_dict(self) -> dict[str, Any]:
        from ..models.backlog_quota_events import BacklogQuotaEvents # noqa: PLC0415
        from ..models.compaction_stats import CompactionStats # noqa: PLC0415
        from ..models.publisher_stats import PublisherStats # noqa: PLC0415
        from ..models.subscriptions import Subscriptions # noqa: PLC0415
        backlog_size = self.backlog_size

        bytes_in_counter = self.bytes_in_counter

        compaction = self.compaction.to_dict()

        msg_in_counter = self.msg_in_counter

        storage_size = self.storage_size

        subscriptions = self.subscriptions.to_dict()

        average_msg_size = self.average_msg_size

        backlog_quota_events: dict[str, Any] | Unset = UNSET
        if not isinstance(self.backlog_quota_events, Unset):
            backlog_quota_events = self.backlog_quota_events.to_dict()

        bytes_out_counter = self.bytes_out_counter

        msg_out_counter = self.msg_out_counter

        msg_rate_in = self.msg_rate_in

        msg_rate_out = self.msg_rate_out

        msg_throughput_in = self.msg_throughput_in

        msg_throughput_out = self.msg_throughput_out

        owner_broker: None | str | Unset
        if isinstance(self.owner_broker, Unset):
            owner_broker = UNSET
        else:
            owner_broker = self.owner_broker

        partitions = self.partitions

        publishers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.publishers, Unset):
            publishers = []
            for publishers_item_data in self.publishers:
                publishers_item = publishers_item_data.to_dict()
                publishers.append(publishers_item)




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
        if average_msg_size is not UNSET:
            field_dict["averageMsgSize"] = average_msg_size
        if backlog_quota_events is not UNSET:
            field_dict["backlogQuotaEvents"] = backlog_quota_events
        if bytes_out_counter is not UNSET:
            field_dict["bytesOutCounter"] = bytes_out_counter
        if msg_out_counter is not UNSET:
            field_dict["msgOutCounter"] = msg_out_counter
        if msg_rate_in is not UNSET:
            field_dict["msgRateIn"] = msg_rate_in
        if msg_rate_out is not UNSET:
            field_dict["msgRateOut"] = msg_rate_out
        if msg_throughput_in is not UNSET:
            field_dict["msgThroughputIn"] = msg_throughput_in
        if msg_throughput_out is not UNSET:
            field_dict["msgThroughputOut"] = msg_throughput_out
        if owner_broker is not UNSET:
            field_dict["ownerBroker"] = owner_broker
        if partitions is not UNSET:
            field_dict["partitions"] = partitions
        if publishers is not UNSET:
            field_dict["publishers"] = publishers

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backlog_quota_events import BacklogQuotaEvents # noqa: PLC0415
        from ..models.compaction_stats import CompactionStats # noqa: PLC0415
        from ..models.publisher_stats import PublisherStats # noqa: PLC0415
        from ..models.subscriptions import Subscriptions # noqa: PLC0415
        d = dict(src_dict)
        backlog_size = d.pop("backlogSize")

        bytes_in_counter = d.pop("bytesInCounter")

        compaction = CompactionStats.from_dict(d.pop("compaction"))




        msg_in_counter = d.pop("msgInCounter")

        storage_size = d.pop("storageSize")

        subscriptions = Subscriptions.from_dict(d.pop("subscriptions"))




        average_msg_size = d.pop("averageMsgSize", UNSET)

        _backlog_quota_events = d.pop("backlogQuotaEvents", UNSET)
        backlog_quota_events: BacklogQuotaEvents | Unset
        if isinstance(_backlog_quota_events,  Unset):
            backlog_quota_events = UNSET
        else:
            backlog_quota_events = BacklogQuotaEvents.from_dict(_backlog_quota_events)




        bytes_out_counter = d.pop("bytesOutCounter", UNSET)

        msg_out_counter = d.pop("msgOutCounter", UNSET)

        msg_rate_in = d.pop("msgRateIn", UNSET)

        msg_rate_out = d.pop("msgRateOut", UNSET)

        msg_throughput_in = d.pop("msgThroughputIn", UNSET)

        msg_throughput_out = d.pop("msgThroughputOut", UNSET)

        def _parse_owner_broker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        owner_broker = _parse_owner_broker(d.pop("ownerBroker", UNSET))


        partitions = d.pop("partitions", UNSET)

        _publishers = d.pop("publishers", UNSET)
        publishers: list[PublisherStats] | Unset = UNSET
        if _publishers is not UNSET:
            publishers = []
            for publishers_item_data in _publishers:
                publishers_item = PublisherStats.from_dict(publishers_item_data)



                publishers.append(publishers_item)


        topic_stats = cls(
            backlog_size=backlog_size,
            bytes_in_counter=bytes_in_counter,
            compaction=compaction,
            msg_in_counter=msg_in_counter,
            storage_size=storage_size,
            subscriptions=subscriptions,
            average_msg_size=average_msg_size,
            backlog_quota_events=backlog_quota_events,
            bytes_out_counter=bytes_out_counter,
            msg_out_counter=msg_out_counter,
            msg_rate_in=msg_rate_in,
            msg_rate_out=msg_rate_out,
            msg_throughput_in=msg_throughput_in,
            msg_throughput_out=msg_throughput_out,
            owner_broker=owner_broker,
            partitions=partitions,
            publishers=publishers,
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
