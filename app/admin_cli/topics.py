"""`quire admin topics ...`: topics, their subscriptions, stats, compaction and policies, each
command named as in pulsar-admin (Quire's own, such as the rollover policy, named alike)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from quire_client import Client
from quire_client.api.admin import (
    admin_create_subscription,
    admin_delete_subscription,
    create_partitioned_topic,
    create_topic,
    delete_topic,
    examine_message,
    expire_messages,
    expire_messages_all_subscriptions,
    get_compaction_policy,
    get_compaction_status,
    get_compaction_threshold,
    get_deduplication_enabled,
    get_internal_stats,
    get_message_ttl,
    get_partitioned_stats,
    get_partitions,
    get_retention,
    get_rollover_policy,
    get_topic_stats,
    list_subscriptions,
    list_topics,
    lookup_topic,
    peek_message,
    remove_compaction_policy,
    remove_compaction_threshold,
    remove_deduplication_enabled,
    remove_message_ttl,
    remove_retention,
    remove_rollover_policy,
    reset_cursor,
    set_compaction_policy,
    set_compaction_threshold,
    set_deduplication_enabled,
    set_message_ttl,
    set_retention,
    set_rollover_policy,
    skip_all_messages,
    skip_messages,
    terminate_topic,
    trigger_compaction,
    truncate_topic,
    truncate_topic_before,
    unload_topic,
    update_partitioned_topic,
)
from quire_client.api.data import create_subscription, seek_subscription
from quire_client.models import (
    ExamineMessageInitialposition,
    MessageIdBody,
    SeekRequest,
    SubscriptionRequest,
    SubscriptionRequestInitialPosition,
    SubscriptionRequestType,
)

from app.admin_cli.base import (
    Commands,
    Handler,
    TopicName,
    count_arg,
    duration_arg,
    namespace_arg,
    or_unlimited,
    positive_int,
    result,
    size_arg,
)
from app.admin_cli.policies import (
    add_topic_backlog_quotas,
    compaction_policy_body,
    compaction_policy_flags,
    retention_body,
    rollover_policy_body,
    rollover_policy_flags,
)


def _topic(args: argparse.Namespace) -> TopicName:
    topic: TopicName = args.topic
    return topic


def _topic_call(operation: Any) -> Handler:
    """A command that is one call on the topic, e.g. get_topic_stats."""

    def run(client: Client, args: argparse.Namespace) -> Any:
        return result(operation.sync_detailed(*_topic(args), client=client))

    return run


def _list(client: Client, args: argparse.Namespace) -> Any:
    return result(list_topics.sync_detailed(*args.namespace, client=client))


def _create(client: Client, args: argparse.Namespace) -> Any:
    if args.partitions:
        response = create_partitioned_topic.sync_detailed(*_topic(args), client=client, body=args.partitions)
        return result(response)
    return result(create_topic.sync_detailed(*_topic(args), client=client))


def _delete(client: Client, args: argparse.Namespace) -> Any:
    return result(delete_topic.sync_detailed(*_topic(args), client=client, force=args.force))


def _partitioned_lookup(client: Client, args: argparse.Namespace) -> Any:
    """Each partition's owner (pulsar-admin's partitioned-lookup), by one lookup per partition."""
    tenant, namespace, topic = _topic(args)
    partitions = result(get_partitions.sync_detailed(tenant, namespace, topic, client=client))["partitions"]
    names = [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]
    owners = {}
    for name in names:
        found = result(lookup_topic.sync_detailed(tenant, namespace, name, client=client))
        owners[f"persistent://{tenant}/{namespace}/{name}"] = found["brokerUrl"]
    return owners


def _lifecycle(topics: Commands) -> None:
    topics.add("list", _list, "topics of a namespace").add_argument(
        "namespace", type=namespace_arg, help="tenant/namespace"
    )
    p = topics.on_topic("create", _create, "create a topic (partitioned with -p N)")
    p.add_argument("-p", "--partitions", type=count_arg, default=0, help="partitions (default 0: none)")
    p = topics.on_topic("create-partitioned-topic", _create, "create a partitioned topic")
    p.add_argument("-p", "--partitions", type=positive_int, required=True, help="number of partitions")
    topics.on_topic(
        "get-partitioned-topic-metadata", _topic_call(get_partitions), "partitions (0: not partitioned)"
    )
    p = topics.on_topic("delete", _delete, "delete a topic, its ledgers, cursors and compacted ledger")
    p.add_argument("-f", "--force", action="store_true", help="even with subscriptions or consumers")
    topics.on_topic("stats", _topic_call(get_topic_stats), "counters, storage and backlog per subscription")
    topics.on_topic(
        "partitioned-stats",
        _topic_call(get_partitioned_stats),
        "a partitioned topic's stats summed, and each partition's",
    )
    topics.on_topic(
        "stats-internal",
        _topic_call(get_internal_stats),
        "the managed ledger's ledgers, cursors and compacted ledger",
        aliases=["internal-stats"],
    )
    topics.on_topic("compact", _topic_call(trigger_compaction), "start a compaction run")
    topics.on_topic("compaction-status", _topic_call(get_compaction_status), "the last compaction run")
    topics.on_topic("unload", _topic_call(unload_topic), "release the topic's ownership")
    topics.on_topic("lookup", _topic_call(lookup_topic), "the broker that owns the topic")
    topics.on_topic("partitioned-lookup", _partitioned_lookup, "the broker that owns each partition")


# --- subscriptions ---------------------------------------------------------------------------------


def _create_subscription(client: Client, args: argparse.Namespace) -> Any:
    """At earliest or latest with any type (the data plane's PUT), or at a message id (the admin
    API's, which makes a shared subscription; 409 when it exists, as pulsar-admin)."""
    if args.message_id not in ("earliest", "latest"):
        if args.type != "shared" or args.read_compacted:
            print("quire admin: -m MESSAGE_ID makes a plain shared subscription", file=sys.stderr)
            raise SystemExit(2)  # bad usage, as argparse's
        response = admin_create_subscription.sync_detailed(
            *_topic(args), args.subscription, client=client, message_id=args.message_id
        )
        return result(response)
    body = SubscriptionRequest(
        initial_position=SubscriptionRequestInitialPosition(args.message_id),
        type_=SubscriptionRequestType(args.type),
        read_compacted=args.read_compacted,
    )
    created = create_subscription.sync_detailed(*_topic(args), args.subscription, client=client, body=body)
    result(created)  # {"created": false} when it was there already: nothing to print, as pulsar-admin
    return None


def _unsubscribe(client: Client, args: argparse.Namespace) -> Any:
    return result(admin_delete_subscription.sync_detailed(*_topic(args), args.subscription, client=client))


def _reset_cursor(client: Client, args: argparse.Namespace) -> Any:
    """To a time `-t` ago (the admin API's resetcursor), or to a message id (the seek operation)."""
    if args.time is not None:
        timestamp = max(0, int(time.time() * 1000) - args.time)
        response = reset_cursor.sync_detailed(*_topic(args), args.subscription, timestamp, client=client)
        return result(response)
    body = SeekRequest(message_id=args.message_id)
    return result(seek_subscription.sync_detailed(*_topic(args), args.subscription, client=client, body=body))


def _subscriptions(topics: Commands) -> None:
    def with_subscription(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("-s", "--subscription", required=True, help="subscription name")
        return p

    topics.on_topic("subscriptions", _topic_call(list_subscriptions), "the topic's subscriptions")
    p = with_subscription(
        topics.on_topic("create-subscription", _create_subscription, "create a durable subscription")
    )
    p.add_argument(
        "-m", "--messageId", dest="message_id", default="latest", help="earliest, latest (default) or an id"
    )
    p.add_argument(
        "--type",
        choices=[t.value for t in SubscriptionRequestType],
        default="shared",
        help="subscription type, fixed at creation (default shared)",
    )
    p.add_argument("--read-compacted", action="store_true", help="read the compacted view")
    with_subscription(topics.on_topic("unsubscribe", _unsubscribe, "delete a subscription"))
    p = with_subscription(
        topics.on_topic("reset-cursor", _reset_cursor, "move a subscription to a time or a message id")
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-t", "--time", type=duration_arg, help="to this long ago: e.g. 10m, 3h, 2d")
    where.add_argument("-m", "--messageId", dest="message_id", help="to a message id, earliest or latest")


# --- a subscription's backlog, and growing partitions ---------------------------------------------


def _peek(client: Client, args: argparse.Namespace) -> Any:
    """The first n messages the subscription has not acked (fewer when the backlog is shorter)."""
    out: list[Any] = []
    for n in range(1, args.count + 1):
        response = peek_message.sync_detailed(*_topic(args), args.subscription, n, client=client)
        if response.status_code == 404 and out:
            break
        out.append(result(response))
    return out


def _examine(client: Client, args: argparse.Namespace) -> Any:
    position = ExamineMessageInitialposition(args.initial_position)
    response = examine_message.sync_detailed(
        *_topic(args), client=client, initial_position=position, message_position=args.message_position
    )
    return result(response)


def _skip(client: Client, args: argparse.Namespace) -> Any:
    return result(skip_messages.sync_detailed(*_topic(args), args.subscription, args.count, client=client))


def _clear_backlog(client: Client, args: argparse.Namespace) -> Any:
    return result(skip_all_messages.sync_detailed(*_topic(args), args.subscription, client=client))


def _expire(client: Client, args: argparse.Namespace) -> Any:
    seconds = args.time // 1000
    if args.subscription is None:
        response = expire_messages_all_subscriptions.sync_detailed(*_topic(args), seconds, client=client)
    else:
        response = expire_messages.sync_detailed(*_topic(args), args.subscription, seconds, client=client)
    return result(response)


def _truncate_before(client: Client, args: argparse.Namespace) -> Any:
    body = MessageIdBody(message_id=args.message_id)
    return result(truncate_topic_before.sync_detailed(*_topic(args), client=client, body=body))


def _whole_topic(topics: Commands) -> None:
    topics.on_topic("terminate", _topic_call(terminate_topic), "take no message again; the last id")
    topics.on_topic("truncate", _topic_call(truncate_topic), "every subscription to the end; delete the data")
    p = topics.on_topic(
        "truncate-before", _truncate_before, "delete every message before an id (Kafka's delete-records)"
    )
    p.add_argument("-m", "--messageId", dest="message_id", required=True, help="the new first id, L:E:B")


def _update_partitions(client: Client, args: argparse.Namespace) -> Any:
    response = update_partitioned_topic.sync_detailed(*_topic(args), client=client, body=args.partitions)
    return result(response)


def _backlog(topics: Commands) -> None:
    p = topics.on_topic("peek-messages", _peek, "the first messages a subscription has not acked")
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-n", "--count", type=positive_int, default=1, help="how many (default 1)")
    p = topics.on_topic("examine-message", _examine, "the n-th entry from the oldest or the newest")
    p.add_argument("-i", "--initialPosition", dest="initial_position", choices=["earliest", "latest"])
    p.set_defaults(initial_position="latest")
    p.add_argument("-m", "--messagePosition", dest="message_position", type=positive_int, default=1)
    p = topics.on_topic("skip", _skip, "ack the next n messages a subscription has not acked")
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p.add_argument("-n", "--count", type=positive_int, required=True, help="how many")
    p = topics.on_topic("clear-backlog", _clear_backlog, "ack everything stored so far")
    p.add_argument("-s", "--subscription", required=True, help="subscription name")
    p = topics.on_topic(
        "expire-messages", _expire, "ack messages older than -t (all subscriptions without -s)"
    )
    p.add_argument("-s", "--subscription", help="subscription name (default: every subscription)")
    p.add_argument("-t", "--expireTime", dest="time", type=duration_arg, required=True, help="e.g. 90s, 1h")
    p = topics.on_topic("update-partitioned-topic", _update_partitions, "grow a partitioned topic")
    p.add_argument("-p", "--partitions", type=positive_int, required=True, help="the new, larger count")


# --- policies: get-X (effective value), set-X (on the topic), remove-X (fall back) -----------------


def _set_retention(client: Client, args: argparse.Namespace) -> Any:
    body = retention_body(args)
    return result(set_retention.sync_detailed(*_topic(args), client=client, body=body))


def _retention_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-s", "--size", type=or_unlimited(size_arg), required=True, help="e.g. 10M, 3T; -1 no limit"
    )
    p.add_argument(
        "-t", "--time", type=or_unlimited(duration_arg), required=True, help="e.g. 3h, 2d; -1 no limit"
    )


def _set_compaction_threshold(client: Client, args: argparse.Namespace) -> Any:
    return result(set_compaction_threshold.sync_detailed(*_topic(args), client=client, body=args.threshold))


def _compaction_threshold_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--threshold", type=size_arg, required=True, help="backlog size: e.g. 100M; 0 off")


def _set_deduplication(client: Client, args: argparse.Namespace) -> Any:
    return result(set_deduplication_enabled.sync_detailed(*_topic(args), client=client, body=args.enable))


def _deduplication_flags(p: argparse.ArgumentParser) -> None:
    switch = p.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", dest="enable", action="store_true", default=None)
    switch.add_argument("-d", "--disable", dest="enable", action="store_false")


def _set_message_ttl(client: Client, args: argparse.Namespace) -> Any:
    response = set_message_ttl.sync_detailed(*_topic(args), client=client, message_ttl=args.ttl // 1000)
    return result(response)


def _message_ttl_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--ttl", type=duration_arg, required=True, help="e.g. 3600s, 1h; 0 off")


def _set_compaction_policy(client: Client, args: argparse.Namespace) -> Any:
    body = compaction_policy_body(args)
    return result(set_compaction_policy.sync_detailed(*_topic(args), client=client, body=body))


def _set_rollover(client: Client, args: argparse.Namespace) -> Any:
    body = rollover_policy_body(args)
    return result(set_rollover_policy.sync_detailed(*_topic(args), client=client, body=body))


POLICIES = (
    # name, what it is, its get, set and remove, the set command's flags
    ("retention", "retention", get_retention, _set_retention, remove_retention, _retention_flags),
    (
        "compaction-threshold",
        "compaction threshold (backlog bytes)",
        get_compaction_threshold,
        _set_compaction_threshold,
        remove_compaction_threshold,
        _compaction_threshold_flags,
    ),
    (
        "deduplication",
        "deduplication",
        get_deduplication_enabled,
        _set_deduplication,
        remove_deduplication_enabled,
        _deduplication_flags,
    ),
    (
        "message-ttl",
        "message TTL (seconds)",
        get_message_ttl,
        _set_message_ttl,
        remove_message_ttl,
        _message_ttl_flags,
    ),
    (
        "rollover-policy",
        "ledger rollover policy",
        get_rollover_policy,
        _set_rollover,
        remove_rollover_policy,
        rollover_policy_flags,
    ),
    (
        "compaction-policy",
        "compaction policy (key-less messages, tombstone retention, time and ratio triggers)",
        get_compaction_policy,
        _set_compaction_policy,
        remove_compaction_policy,
        compaction_policy_flags,
    ),
)


def _policies(topics: Commands) -> None:
    for name, what, get, set_, remove, flags in POLICIES:
        topics.on_topic(f"get-{name}", _topic_call(get), f"the effective {what}")
        flags(topics.on_topic(f"set-{name}", set_, f"set the topic's {what}"))
        topics.on_topic(
            f"remove-{name}",
            _topic_call(remove),
            f"drop the topic's {what}: the namespace's or the default applies",
        )


def add_topics(groups: Any, common: argparse.ArgumentParser) -> None:
    topics = Commands(groups, "topics", "topics, subscriptions, stats, compaction, policies", common)
    _lifecycle(topics)
    _subscriptions(topics)
    _backlog(topics)
    _whole_topic(topics)
    _policies(topics)
    add_topic_backlog_quotas(topics)
