""" Contains all the data models used in inputs/outputs """

from .ack_request import AckRequest
from .auth_action import AuthAction
from .backlog_quota import BacklogQuota
from .backlog_quota_events import BacklogQuotaEvents
from .backlog_quota_map import BacklogQuotaMap
from .backlog_quota_policy import BacklogQuotaPolicy
from .backlog_quota_update import BacklogQuotaUpdate
from .backlog_quota_update_policy_type_0 import BacklogQuotaUpdatePolicyType0
from .bookie_info import BookieInfo
from .bookie_info_state import BookieInfoState
from .bookie_list import BookieList
from .broker_info import BrokerInfo
from .checks import Checks
from .compacted_ledger_info import CompactedLedgerInfo
from .compaction_policy import CompactionPolicy
from .compaction_policy_update import CompactionPolicyUpdate
from .compaction_stats import CompactionStats
from .compaction_status import CompactionStatus
from .compaction_status_status import CompactionStatusStatus
from .consumer_stats import ConsumerStats
from .cursor_stats import CursorStats
from .cursors import Cursors
from .ensembles import Ensembles
from .examine_message_initialposition import ExamineMessageInitialposition
from .get_all_versions_response import GetAllVersionsResponse
from .get_schema_compatibility_strategy_response_getschemacompatibilitystrategy import GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy
from .get_schema_response import GetSchemaResponse
from .health import Health
from .internal_stats import InternalStats
from .internal_stats_by_partition import InternalStatsByPartition
from .kafka_group import KafkaGroup
from .kafka_group_member import KafkaGroupMember
from .kafka_group_offset import KafkaGroupOffset
from .kafka_group_state_type_0 import KafkaGroupStateType0
from .keyless_policy import KeylessPolicy
from .last_message_id import LastMessageId
from .ledger_info import LedgerInfo
from .lookup_result import LookupResult
from .message_id_body import MessageIdBody
from .message_list import MessageList
from .message_out import MessageOut
from .nack_request import NackRequest
from .namespace import Namespace
from .partition_last_message_ids import PartitionLastMessageIds
from .partition_stats import PartitionStats
from .partitioned_internal_stats import PartitionedInternalStats
from .partitioned_metadata import PartitionedMetadata
from .partitioned_topic_stats import PartitionedTopicStats
from .partitions import Partitions
from .post_schema_payload import PostSchemaPayload
from .post_schema_payload_type import PostSchemaPayloadType
from .post_schema_properties import PostSchemaProperties
from .problem import Problem
from .produce_message import ProduceMessage
from .produce_message_properties_type_0 import ProduceMessagePropertiesType0
from .produce_request import ProduceRequest
from .produce_response import ProduceResponse
from .produce_result import ProduceResult
from .properties import Properties
from .publisher_stats import PublisherStats
from .read_page import ReadPage
from .readiness import Readiness
from .remove_backlog_quota_backlogquotatype import RemoveBacklogQuotaBacklogquotatype
from .remove_namespace_backlog_quota_backlogquotatype import RemoveNamespaceBacklogQuotaBacklogquotatype
from .response_getpermissions import ResponseGetpermissions
from .retention_policy import RetentionPolicy
from .retention_policy_update import RetentionPolicyUpdate
from .rollover_policy import RolloverPolicy
from .rollover_policy_update import RolloverPolicyUpdate
from .schema_properties import SchemaProperties
from .schema_version_response import SchemaVersionResponse
from .seek_request import SeekRequest
from .set_backlog_quota_backlogquotatype import SetBacklogQuotaBacklogquotatype
from .set_namespace_backlog_quota_backlogquotatype import SetNamespaceBacklogQuotaBacklogquotatype
from .set_schema_compatibility_strategy_strategy import SetSchemaCompatibilityStrategyStrategy
from .stats_by_partition import StatsByPartition
from .subscription_created import SubscriptionCreated
from .subscription_request import SubscriptionRequest
from .subscription_request_initial_position import SubscriptionRequestInitialPosition
from .subscription_request_type import SubscriptionRequestType
from .subscription_stats import SubscriptionStats
from .subscriptions import Subscriptions
from .subscriptions_of_partition import SubscriptionsOfPartition
from .subscriptions_of_partitioned_topic import SubscriptionsOfPartitionedTopic
from .tenant import Tenant
from .tenant_info import TenantInfo
from .terminate_result import TerminateResult
from .topic_stats import TopicStats
from .under_replicated_info import UnderReplicatedInfo
from .under_replicated_list import UnderReplicatedList
from .value_encoding import ValueEncoding

__all__ = (
    "AckRequest",
    "AuthAction",
    "BacklogQuota",
    "BacklogQuotaEvents",
    "BacklogQuotaMap",
    "BacklogQuotaPolicy",
    "BacklogQuotaUpdate",
    "BacklogQuotaUpdatePolicyType0",
    "BookieInfo",
    "BookieInfoState",
    "BookieList",
    "BrokerInfo",
    "Checks",
    "CompactedLedgerInfo",
    "CompactionPolicy",
    "CompactionPolicyUpdate",
    "CompactionStats",
    "CompactionStatus",
    "CompactionStatusStatus",
    "ConsumerStats",
    "Cursors",
    "CursorStats",
    "Ensembles",
    "ExamineMessageInitialposition",
    "GetAllVersionsResponse",
    "GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy",
    "GetSchemaResponse",
    "Health",
    "InternalStats",
    "InternalStatsByPartition",
    "KafkaGroup",
    "KafkaGroupMember",
    "KafkaGroupOffset",
    "KafkaGroupStateType0",
    "KeylessPolicy",
    "LastMessageId",
    "LedgerInfo",
    "LookupResult",
    "MessageIdBody",
    "MessageList",
    "MessageOut",
    "NackRequest",
    "Namespace",
    "PartitionedInternalStats",
    "PartitionedMetadata",
    "PartitionedTopicStats",
    "PartitionLastMessageIds",
    "Partitions",
    "PartitionStats",
    "PostSchemaPayload",
    "PostSchemaPayloadType",
    "PostSchemaProperties",
    "Problem",
    "ProduceMessage",
    "ProduceMessagePropertiesType0",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceResult",
    "Properties",
    "PublisherStats",
    "Readiness",
    "ReadPage",
    "RemoveBacklogQuotaBacklogquotatype",
    "RemoveNamespaceBacklogQuotaBacklogquotatype",
    "ResponseGetpermissions",
    "RetentionPolicy",
    "RetentionPolicyUpdate",
    "RolloverPolicy",
    "RolloverPolicyUpdate",
    "SchemaProperties",
    "SchemaVersionResponse",
    "SeekRequest",
    "SetBacklogQuotaBacklogquotatype",
    "SetNamespaceBacklogQuotaBacklogquotatype",
    "SetSchemaCompatibilityStrategyStrategy",
    "StatsByPartition",
    "SubscriptionCreated",
    "SubscriptionRequest",
    "SubscriptionRequestInitialPosition",
    "SubscriptionRequestType",
    "Subscriptions",
    "SubscriptionsOfPartition",
    "SubscriptionsOfPartitionedTopic",
    "SubscriptionStats",
    "Tenant",
    "TenantInfo",
    "TerminateResult",
    "TopicStats",
    "UnderReplicatedInfo",
    "UnderReplicatedList",
    "ValueEncoding",
)
