"""`quire admin tenants|namespaces|brokers|bookies|kafka-groups ...`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from quire_client import Client
from quire_client.api.admin import (
    cancel_bookie_decommission,
    create_namespace,
    create_tenant,
    decommission_bookie,
    delete_kafka_group,
    delete_namespace,
    delete_tenant,
    get_kafka_group,
    get_permissions,
    get_tenant,
    grant_permission,
    list_bookies,
    list_brokers,
    list_kafka_groups,
    list_namespaces,
    list_tenants,
    list_topics,
    list_under_replicated_ledgers,
    revoke_permission,
    update_tenant,
)
from quire_client.api.ops import readyz
from quire_client.models import AuthAction, TenantInfo

from app.admin_cli.base import Commands, Refused, namespace_arg, problem_line, result, tenant_arg
from app.admin_cli.policies import add_namespace_policies


def _on_tenant(operation: Any) -> Any:
    return lambda client, args: result(operation.sync_detailed(args.tenant, client=client))


def _on_namespace(operation: Any) -> Any:
    return lambda client, args: result(operation.sync_detailed(*args.namespace, client=client))


def _names(text: str) -> list[str]:
    """`a,b,c` (pulsar-admin's lists of roles, clusters and actions); empty items dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _tenant_info(args: argparse.Namespace) -> TenantInfo:
    return TenantInfo(admin_roles=args.admin_roles, allowed_clusters=args.allowed_clusters)


def _tenant_info_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("tenant", type=tenant_arg)
    p.add_argument("-r", "--admin-roles", type=_names, default=[], help="roles that administer it: a,b")
    p.add_argument("-c", "--allowed-clusters", type=_names, default=[], help="clusters it may use: a,b")


def add_tenants(groups: Any, common: argparse.ArgumentParser) -> None:
    tenants = Commands(groups, "tenants", "tenants", common)
    tenants.add("list", lambda c, a: result(list_tenants.sync_detailed(client=c)), "all tenants")
    for name, operation, help in (
        ("get", get_tenant, "a tenant: its namespaces, admin roles and allowed clusters"),
        ("delete", delete_tenant, "delete a tenant that has no namespaces"),
    ):
        tenants.add(name, _on_tenant(operation), help).add_argument("tenant", type=tenant_arg)
    create = tenants.add(
        "create",
        lambda c, a: result(create_tenant.sync_detailed(a.tenant, client=c, body=_tenant_info(a))),
        "create a tenant, with the roles that administer it",
    )
    _tenant_info_arguments(create)
    update = tenants.add(
        "update",
        lambda c, a: result(update_tenant.sync_detailed(a.tenant, client=c, body=_tenant_info(a))),
        "replace a tenant's admin roles and allowed clusters",
    )
    _tenant_info_arguments(update)


def _actions(text: str) -> list[AuthAction]:
    try:
        return [AuthAction(action) for action in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: actions are produce, consume or produce,consume"
        ) from None


def _add_permissions(namespaces: Commands) -> None:
    p = namespaces.add("permissions", _on_namespace(get_permissions), "roles and what each may do")
    p.add_argument("namespace", type=namespace_arg, help="tenant/namespace")
    p = namespaces.add(
        "grant-permission",
        lambda c, a: result(
            grant_permission.sync_detailed(a.namespace[0], a.namespace[1], a.role, client=c, body=a.actions)
        ),
        "let a role produce, consume or both in the namespace",
    )
    p.add_argument("namespace", type=namespace_arg, help="tenant/namespace")
    p.add_argument("--role", required=True, help="the role (a token's subject)")
    p.add_argument("--actions", type=_actions, required=True, help="produce, consume or produce,consume")
    p = namespaces.add(
        "revoke-permission",
        lambda c, a: result(
            revoke_permission.sync_detailed(a.namespace[0], a.namespace[1], a.role, client=c)
        ),
        "take everything a role was granted in the namespace away",
    )
    p.add_argument("namespace", type=namespace_arg, help="tenant/namespace")
    p.add_argument("--role", required=True, help="the role (a token's subject)")


def add_namespaces(groups: Any, common: argparse.ArgumentParser) -> None:
    namespaces = Commands(groups, "namespaces", "namespaces", common)
    p = namespaces.add("list", _on_tenant(list_namespaces), "namespaces of a tenant")
    p.add_argument("tenant", type=tenant_arg)
    for name, operation, help in (
        ("topics", list_topics, "topics of a namespace"),
        ("create", create_namespace, "create a namespace"),
        ("delete", delete_namespace, "delete a namespace that has no topics"),
    ):
        p = namespaces.add(name, _on_namespace(operation), help)
        p.add_argument("namespace", type=namespace_arg, help="tenant/namespace")
    add_namespace_policies(namespaces)
    _add_permissions(namespaces)


def _healthcheck(client: Client, args: argparse.Namespace) -> Any:
    """`ok` when the broker is ready (/readyz), else Refused naming the checks that fail."""
    response = readyz.sync_detailed(client=client)
    if response.status_code == 200:
        print("ok")
        return None
    try:
        checks = json.loads(response.content)["checks"]
        failing = ", ".join(name for name, ok in checks.items() if not ok)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Refused(problem_line(int(response.status_code), response.content)) from None
    raise Refused(f"{int(response.status_code)} not ready: {failing} unreachable")


def add_brokers(groups: Any, common: argparse.ArgumentParser) -> None:
    brokers = Commands(groups, "brokers", "brokers", common)
    p = brokers.add("list", lambda c, a: result(list_brokers.sync_detailed(client=c)), "the live brokers")
    p.add_argument("cluster", nargs="?", help="ignored: a Quire deployment is one cluster")
    brokers.add("healthcheck", _healthcheck, "whether the broker is ready: prints ok")


def add_bookies(groups: Any, common: argparse.ArgumentParser) -> None:
    bookies = Commands(groups, "bookies", "bookies and auto-recovery", common)
    bookies.add(
        "list",
        lambda c, a: result(list_bookies.sync_detailed(client=c)),
        "every registered bookie and its state",
        aliases=["list-bookies"],
    )
    p = bookies.add(
        "decommission",
        lambda c, a: result(decommission_bookie.sync_detailed(a.bookie_id, client=c)),
        "move every ledger copy off a bookie, then mark it decommissioned",
    )
    p.add_argument("bookie_id", metavar="BOOKIE_ID", help="host:port")
    p = bookies.add(
        "cancel-decommission",
        lambda c, a: result(cancel_bookie_decommission.sync_detailed(a.bookie_id, client=c)),
        "cancel a decommission: the bookie takes new ledgers again",
    )
    p.add_argument("bookie_id", metavar="BOOKIE_ID", help="host:port")
    bookies.add(
        "underreplicated",
        lambda c, a: result(list_under_replicated_ledgers.sync_detailed(client=c)),
        "ledgers auto-recovery has not re-replicated yet",
    )


def add_kafka_groups(groups: Any, common: argparse.ArgumentParser) -> None:
    kafka = Commands(groups, "kafka-groups", "Kafka consumer groups and their committed offsets", common)
    kafka.add(
        "list", lambda c, a: result(list_kafka_groups.sync_detailed(client=c)), "every Kafka consumer group"
    )
    p = kafka.add(
        "get",
        lambda c, a: result(get_kafka_group.sync_detailed(a.group, client=c)),
        "a group's committed offsets, and its members if this broker coordinates it",
    )
    p.add_argument("group", help="the group id")
    p = kafka.add(
        "delete",
        lambda c, a: result(delete_kafka_group.sync_detailed(a.group, client=c)),
        "delete a group's committed offsets (refused while it has members)",
    )
    p.add_argument("group", help="the group id")
