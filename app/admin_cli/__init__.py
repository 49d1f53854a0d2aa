"""`quire admin`: the admin REST API from the command line, in pulsar-admin's grammar.

    quire admin [--url URL] [--token TOKEN] <GROUP> <command> [args]

GROUP is one of topics, tenants, namespaces, brokers, bookies, kafka-groups, schemas.

Built on the generated client (quire_client), which follows a broker's 307 to a topic's owner,
so any broker's URL will do. `--url` defaults to $QUIRE_ADMIN_URL, else http://127.0.0.1:8080.
`--token` (default $QUIRE_ADMIN_TOKEN) is sent as `Authorization: Bearer`, to the owner too.
A topic is `persistent://tenant/namespace/topic`, `tenant/namespace/topic`, or a bare `topic`
(in public/default), as in pulsar-admin.

Reads print the server's JSON, indented; writes print nothing. Exit status: 0 done; 1 the server
refused (its problem's status, title and detail on one line on stderr) or could not be reached;
2 bad usage. See docs/admin-cli.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import cast

import httpx
from quire_client import AuthenticatedClient, Client

from app.admin_cli.base import Handler, Refused, url_arg
from app.admin_cli.cluster import add_bookies, add_brokers, add_kafka_groups, add_namespaces, add_tenants
from app.admin_cli.schemas import add_schemas
from app.admin_cli.topics import add_topics

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "QUIRE_ADMIN_URL"
TOKEN_ENV = "QUIRE_ADMIN_TOKEN"
DEFAULT_TIMEOUT_S = 30.0
PROG = "quire admin"

OK, REFUSED = 0, 1  # and 2, bad usage, from argparse


def _connection(parser: argparse.ArgumentParser, default: bool) -> None:
    """--url and --timeout, before the group or after the command (the later one wins)."""
    parser.add_argument(
        "--url",
        type=url_arg,
        default=os.environ.get(URL_ENV, DEFAULT_URL) if default else argparse.SUPPRESS,
        help=f"a broker's URL (default ${URL_ENV}, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV) or None if default else argparse.SUPPRESS,
        help=f"a token (`quire tokens create`), sent as `Authorization: Bearer` (default ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S if default else argparse.SUPPRESS,
        help=f"seconds to wait for an answer (default {DEFAULT_TIMEOUT_S:g})",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Administer a Quire cluster through its REST API, in pulsar-admin's grammar.",
        epilog="exit status: 0 done, 1 the server refused or could not be reached, 2 bad usage",
    )
    _connection(top, default=True)
    common = argparse.ArgumentParser(add_help=False)
    _connection(common, default=False)
    groups = top.add_subparsers(dest="group", required=True, metavar="GROUP")
    for add in (
        add_topics,
        add_tenants,
        add_namespaces,
        add_brokers,
        add_bookies,
        add_kafka_groups,
        add_schemas,
    ):
        add(groups, common)
    return top


def _client(args: argparse.Namespace) -> Client:
    timeout = httpx.Timeout(args.timeout)
    if not args.token:
        return Client(base_url=args.url, timeout=timeout)
    # The API functions take either client; AuthenticatedClient also sends the token again after a
    # redirect to the topic's owner (another origin, where httpx would drop it).
    return cast(Client, AuthenticatedClient(base_url=args.url, token=args.token, timeout=timeout))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status (argparse itself exits 2 on bad usage)."""
    args = parser().parse_args(argv)
    run: Handler = args.run
    try:
        with _client(args) as client:
            shown = run(client, args)
            if shown is not None:
                print(json.dumps(shown, indent=2))
    except Refused as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return REFUSED
    except httpx.TimeoutException:
        print(f"{PROG}: no answer from {args.url} within {args.timeout:g} s", file=sys.stderr)
        return REFUSED
    except httpx.HTTPError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG}: cannot reach {args.url}: {reason}", file=sys.stderr)
        return REFUSED
    except BrokenPipeError:  # the reader stopped reading (`| head`): the command itself was done
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return OK
