"""`quire admin`'s token and its tenant and permission commands, read as pulsar-admin reads them."""

from __future__ import annotations

import pytest
from quire_client import AuthenticatedClient, Client
from quire_client.models import AuthAction

from app.admin_cli import _client, parser


def test_token_comes_from_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUIRE_ADMIN_TOKEN", raising=False)
    assert parser().parse_args(["tenants", "list"]).token is None
    monkeypatch.setenv("QUIRE_ADMIN_TOKEN", "from-env")
    assert parser().parse_args(["tenants", "list"]).token == "from-env"
    assert parser().parse_args(["--token", "a", "tenants", "list"]).token == "a"
    assert parser().parse_args(["tenants", "list", "--token", "b"]).token == "b"


def test_a_token_makes_an_authenticated_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUIRE_ADMIN_TOKEN", raising=False)
    assert type(_client(parser().parse_args(["tenants", "list"]))) is Client
    with_token = _client(parser().parse_args(["--token", "t0k", "tenants", "list"]))
    assert isinstance(with_token, AuthenticatedClient) and with_token.token == "t0k"


def test_tenant_commands_take_admin_roles_and_clusters() -> None:
    args = parser().parse_args(
        ["tenants", "create", "acme", "--admin-roles", "ops, alice", "-c", "standalone"]
    )
    assert (args.tenant, args.admin_roles, args.allowed_clusters) == (
        "acme",
        ["ops", "alice"],
        ["standalone"],
    )
    args = parser().parse_args(["tenants", "update", "acme", "-r", "bob"])
    assert (args.admin_roles, args.allowed_clusters) == (["bob"], [])
    assert parser().parse_args(["tenants", "create", "plain"]).admin_roles == []


def test_permission_commands() -> None:
    args = parser().parse_args(
        ["namespaces", "grant-permission", "acme/ns", "--role", "app", "--actions", "produce,consume"]
    )
    assert (args.namespace, args.role, args.actions) == (
        ("acme", "ns"),
        "app",
        [AuthAction.PRODUCE, AuthAction.CONSUME],
    )
    args = parser().parse_args(["namespaces", "revoke-permission", "acme/ns", "--role", "app"])
    assert (args.namespace, args.role) == (("acme", "ns"), "app")
    assert parser().parse_args(["namespaces", "permissions", "acme/ns"]).namespace == ("acme", "ns")
    for bad in (
        ["namespaces", "grant-permission", "acme/ns", "--role", "app", "--actions", "fly"],
        ["namespaces", "grant-permission", "acme/ns", "--actions", "produce"],
        ["namespaces", "revoke-permission", "acme/ns"],
    ):
        with pytest.raises(SystemExit):
            parser().parse_args(bad)
