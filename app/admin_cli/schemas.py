"""`quire admin schemas ...`: a topic's schema, in pulsar-admin's grammar.

quire admin schemas get TOPIC [--version N | --all-version]
quire admin schemas upload TOPIC -f FILE     # {"type": "AVRO", "schema": "...", "properties": {}}
quire admin schemas delete TOPIC
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from quire_client import Client
from quire_client.api.schemas import (
    delete_schema,
    get_all_schemas,
    get_schema,
    get_schema_version,
    post_schema,
)
from quire_client.models import PostSchemaPayload

from app.admin_cli.base import Commands, Refused, TopicName, result


def _get(client: Client, args: argparse.Namespace) -> Any:
    topic: TopicName = args.topic
    if args.all_version:
        return result(get_all_schemas.sync_detailed(*topic, client=client))
    if args.version is not None:
        return result(get_schema_version.sync_detailed(*topic, args.version, client=client))
    return result(get_schema.sync_detailed(*topic, client=client))


def _upload(client: Client, args: argparse.Namespace) -> Any:
    """The file holds pulsar-admin's payload: {"type": ..., "schema": ..., "properties": ...}."""
    try:
        payload = json.loads(Path(args.filename).read_text())
        body = PostSchemaPayload.from_dict(payload)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Refused(f"{args.filename}: not a schema payload ({exc})") from None
    return result(post_schema.sync_detailed(*args.topic, client=client, body=body))


def _delete(client: Client, args: argparse.Namespace) -> Any:
    return result(delete_schema.sync_detailed(*args.topic, client=client))


def add_schemas(groups: Any, common: argparse.ArgumentParser) -> None:
    schemas = Commands(groups, "schemas", "topics' schemas (the schema registry)", common)
    get = schemas.on_topic("get", _get, "the topic's latest schema, one version, or every version")
    which = get.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, default=None, help="this version (from 0)")
    which.add_argument("-a", "--all-version", action="store_true", help="every live version")
    upload = schemas.on_topic("upload", _upload, "store a schema (its version is printed)")
    upload.add_argument(
        "-f",
        "--filename",
        required=True,
        help='a JSON file: {"type": "AVRO", "schema": "...", "properties": {}}',
    )
    schemas.on_topic("delete", _delete, "delete the topic's schema")
