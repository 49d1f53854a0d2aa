"""`quire admin namespaces get-X|set-X|remove-X` (the namespace policies) and the backlog quota
commands of topics and namespaces, in pulsar-admin's grammar:
`set-backlog-quota NAME -l 10M|-lt 1h -p POLICY [-t destination_storage|message_age]`,
`get-backlog-quotas NAME`, `remove-backlog-quota NAME [-t TYPE]`. Also the compaction policy's
body and flags (`set-compaction-policy NAME [-k drop|keep] [-d 1d] [-l 10m] [-r 0.5]`), on
topics and namespaces alike; the flags left out keep their value."""

from __future__ import annotations

import argparse
from typing import Any

from quire_client import Client
from quire_client.api.admin import (
    get_backlog_quota_map,
    get_namespace_backlog_quota_map,
    get_namespace_compaction_policy,
    get_namespace_compaction_threshold,
    get_namespace_deduplication,
    get_namespace_message_ttl,
    get_namespace_retention,
    get_namespace_rollover_policy,
    remove_backlog_quota,
    remove_namespace_backlog_quota,
    remove_namespace_compaction_policy,
    remove_namespace_compaction_threshold,
    remove_namespace_deduplication,
    remove_namespace_message_ttl,
    remove_namespace_retention,
    remove_namespace_rollover_policy,
    set_backlog_quota,
    set_namespace_backlog_quota,
    set_namespace_compaction_policy,
    set_namespace_compaction_threshold,
    set_namespace_deduplication,
    set_namespace_message_ttl,
    set_namespace_retention,
    set_namespace_rollover_policy,
)
from quire_client.models import (
    BacklogQuotaPolicy,
    BacklogQuotaUpdate,
    BacklogQuotaUpdatePolicyType0,
    CompactionPolicyUpdate,
    KeylessPolicy,
    RemoveBacklogQuotaBacklogquotatype,
    RemoveNamespaceBacklogQuotaBacklogquotatype,
    RetentionPolicyUpdate,
    RolloverPolicyUpdate,
    SetBacklogQuotaBacklogquotatype,
    SetNamespaceBacklogQuotaBacklogquotatype,
)
from quire_client.types import UNSET

from app.admin_cli.base import (
    Commands,
    Handler,
    duration_arg,
    namespace_arg,
    or_unlimited,
    positive_int,
    ratio_arg,
    result,
    size_arg,
)

QUOTA_TYPES = ("destination_storage", "message_age")


def _ns(args: argparse.Namespace) -> tuple[str, str]:
    ns: tuple[str, str] = args.namespace
    return ns


def _on_namespace(operation: Any) -> Handler:
    return lambda client, args: result(operation.sync_detailed(*_ns(args), client=client))


def _given(value: int | None, convert: Any = None) -> Any:
    if value is None:
        return UNSET
    return value if convert is None or value == -1 else convert(value)


# --- namespace policies: an object policy may be given in part (the rest keeps its value) --------


def retention_body(args: argparse.Namespace) -> RetentionPolicyUpdate:
    """The fields given on the command line (topic and namespace alike); the others keep their
    value."""
    return RetentionPolicyUpdate(
        retention_time_in_minutes=_given(args.time, lambda ms: ms // 60_000),
        retention_size_in_mb=_given(args.size, lambda b: b // 1024**2),
    )


def _set_retention(client: Client, args: argparse.Namespace) -> Any:
    body = retention_body(args)
    return result(set_namespace_retention.sync_detailed(*_ns(args), client=client, body=body))


def _retention_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--size", type=or_unlimited(size_arg), help="e.g. 10M, 3T; -1 no limit")
    p.add_argument("-t", "--time", type=or_unlimited(duration_arg), help="e.g. 3h, 2d; -1 no limit")


def _set_threshold(client: Client, args: argparse.Namespace) -> Any:
    return result(
        set_namespace_compaction_threshold.sync_detailed(*_ns(args), client=client, body=args.threshold)
    )


def _threshold_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--threshold", type=size_arg, required=True, help="backlog size: e.g. 100M; 0 off")


def _set_dedup(client: Client, args: argparse.Namespace) -> Any:
    return result(set_namespace_deduplication.sync_detailed(*_ns(args), client=client, body=args.enable))


def _dedup_flags(p: argparse.ArgumentParser) -> None:
    switch = p.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", dest="enable", action="store_true", default=None)
    switch.add_argument("-d", "--disable", dest="enable", action="store_false")


def _set_ttl(client: Client, args: argparse.Namespace) -> Any:
    ttl = args.ttl // 1000
    return result(set_namespace_message_ttl.sync_detailed(*_ns(args), client=client, message_ttl=ttl))


def _ttl_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-ttl",
        "--messageTTL",
        "-t",
        "--ttl",
        dest="ttl",
        type=duration_arg,
        required=True,
        help="e.g. 1h; 0 off",
    )


def rollover_policy_body(args: argparse.Namespace) -> RolloverPolicyUpdate:
    """The fields given on the command line (topic and namespace alike); the others keep their
    value."""
    return RolloverPolicyUpdate(
        max_entries_per_ledger=_given(args.max_entries),
        max_size_per_ledger_bytes=_given(args.max_size),
        min_rollover_time_ms=_given(args.min_time),
        max_rollover_time_ms=_given(args.max_time),
    )


def _set_rollover(client: Client, args: argparse.Namespace) -> Any:
    body = rollover_policy_body(args)
    return result(set_namespace_rollover_policy.sync_detailed(*_ns(args), client=client, body=body))


def rollover_policy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-entries", type=positive_int, help="entries per ledger")
    p.add_argument("--max-size", type=size_arg, help="bytes per ledger: e.g. 2G")
    p.add_argument("--min-time", type=duration_arg, help="e.g. 10m")
    p.add_argument("--max-time", type=duration_arg, help="e.g. 4h")


def compaction_policy_body(args: argparse.Namespace) -> CompactionPolicyUpdate:
    """The fields given on the command line; the others keep their value."""
    return CompactionPolicyUpdate(
        keyless_policy=UNSET if args.keyless_policy is None else KeylessPolicy(args.keyless_policy),
        delete_retention_ms=_given(args.delete_retention),
        max_lag_ms=_given(args.max_lag),
        min_cleanable_dirty_ratio=UNSET if args.dirty_ratio is None else args.dirty_ratio,
    )


def compaction_policy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-k", "--keyless-policy", choices=[k.value for k in KeylessPolicy], help="key-less messages"
    )
    p.add_argument(
        "-d",
        "--delete-retention",
        type=duration_arg,
        help="how long a tombstone stays in the compacted view, e.g. 1d; 0: dropped at once",
    )
    p.add_argument(
        "-l", "--max-lag", type=duration_arg, help="compact when a message waits longer, e.g. 10m; 0 off"
    )
    p.add_argument(
        "-r",
        "--min-cleanable-dirty-ratio",
        dest="dirty_ratio",
        metavar="RATIO",
        type=ratio_arg,
        help="compact when the uncompacted share passes this, 0 to 1; 0 off",
    )


def _set_compaction_policy(client: Client, args: argparse.Namespace) -> Any:
    body = compaction_policy_body(args)
    return result(set_namespace_compaction_policy.sync_detailed(*_ns(args), client=client, body=body))


NAMESPACE_POLICIES = (
    # name, what it is, its get, set and remove, the set command's flags
    (
        "retention",
        "retention",
        get_namespace_retention,
        _set_retention,
        remove_namespace_retention,
        _retention_flags,
    ),
    (
        "compaction-threshold",
        "compaction threshold (backlog bytes)",
        get_namespace_compaction_threshold,
        _set_threshold,
        remove_namespace_compaction_threshold,
        _threshold_flags,
    ),
    (
        "deduplication",
        "deduplication",
        get_namespace_deduplication,
        _set_dedup,
        remove_namespace_deduplication,
        _dedup_flags,
    ),
    (
        "message-ttl",
        "message TTL (seconds)",
        get_namespace_message_ttl,
        _set_ttl,
        remove_namespace_message_ttl,
        _ttl_flags,
    ),
    (
        "rollover-policy",
        "ledger rollover policy",
        get_namespace_rollover_policy,
        _set_rollover,
        remove_namespace_rollover_policy,
        rollover_policy_flags,
    ),
    (
        "compaction-policy",
        "compaction policy (key-less messages, tombstone retention, time and ratio triggers)",
        get_namespace_compaction_policy,
        _set_compaction_policy,
        remove_namespace_compaction_policy,
        compaction_policy_flags,
    ),
)


# --- backlog quotas --------------------------------------------------------------------------------


def _quota_body(args: argparse.Namespace) -> BacklogQuotaUpdate:
    return BacklogQuotaUpdate(
        policy=BacklogQuotaUpdatePolicyType0(args.policy),
        limit_size=_given(args.limit),
        limit_time=_given(args.limit_time, lambda ms: ms // 1000),
    )


def _quota_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-l", "--limit", type=size_arg, help="destination_storage: backlog size, e.g. 10M")
    p.add_argument(
        "-lt", "--limitTime", dest="limit_time", type=duration_arg, help="message_age: e.g. 3600s, 1h"
    )
    p.add_argument("-p", "--policy", required=True, choices=[p.value for p in BacklogQuotaPolicy])
    _type_flag(p)


def _type_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--type", dest="quota_type", choices=QUOTA_TYPES, default=QUOTA_TYPES[0])


def _topic_quota_set(client: Client, args: argparse.Namespace) -> Any:
    kind = SetBacklogQuotaBacklogquotatype(args.quota_type)
    done = set_backlog_quota.sync_detailed(
        *args.topic, client=client, body=_quota_body(args), backlog_quota_type=kind
    )
    return result(done)


def _topic_quota_remove(client: Client, args: argparse.Namespace) -> Any:
    kind = RemoveBacklogQuotaBacklogquotatype(args.quota_type)
    return result(remove_backlog_quota.sync_detailed(*args.topic, client=client, backlog_quota_type=kind))


def _ns_quota_set(client: Client, args: argparse.Namespace) -> Any:
    kind = SetNamespaceBacklogQuotaBacklogquotatype(args.quota_type)
    done = set_namespace_backlog_quota.sync_detailed(
        *_ns(args), client=client, body=_quota_body(args), backlog_quota_type=kind
    )
    return result(done)


def _ns_quota_remove(client: Client, args: argparse.Namespace) -> Any:
    kind = RemoveNamespaceBacklogQuotaBacklogquotatype(args.quota_type)
    done = remove_namespace_backlog_quota.sync_detailed(*_ns(args), client=client, backlog_quota_type=kind)
    return result(done)


def add_topic_backlog_quotas(topics: Commands) -> None:
    def get(client: Client, args: argparse.Namespace) -> Any:
        return result(get_backlog_quota_map.sync_detailed(*args.topic, client=client))

    topics.on_topic("get-backlog-quotas", get, "the effective backlog quotas by type")
    _quota_flags(topics.on_topic("set-backlog-quota", _topic_quota_set, "set a backlog quota on the topic"))
    _type_flag(
        topics.on_topic(
            "remove-backlog-quota",
            _topic_quota_remove,
            "drop one type of the topic's backlog quota: the namespace's then applies",
        )
    )


def add_namespace_policies(namespaces: Commands) -> None:
    def on_namespace(name: str, run: Handler, help: str) -> argparse.ArgumentParser:
        p = namespaces.add(name, run, help)
        p.add_argument("namespace", type=namespace_arg, help="tenant/namespace")
        return p

    for name, what, get, set_, remove, flags in NAMESPACE_POLICIES:
        on_namespace(f"get-{name}", _on_namespace(get), f"the namespace's effective {what}")
        flags(on_namespace(f"set-{name}", set_, f"set the namespace's {what} (its topics' fallback)"))
        on_namespace(
            f"remove-{name}", _on_namespace(remove), f"drop the namespace's {what}: the default applies"
        )
    on_namespace("get-backlog-quotas", _on_namespace(get_namespace_backlog_quota_map), "the backlog quotas")
    _quota_flags(on_namespace("set-backlog-quota", _ns_quota_set, "set a backlog quota on the namespace"))
    _type_flag(on_namespace("remove-backlog-quota", _ns_quota_remove, "drop one type of backlog quota"))
