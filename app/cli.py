"""The `quire` command: `quire standalone|bookie|broker|compactor|autorecovery`, `quire admin` and
`quire tokens`.

Flags override the matching `QUIRE_*` settings. Each process lives in `app/processes/`;
`quire admin ...` (a client of a running cluster, not a process) is app.admin_cli.
Bad settings, from the environment or the env file `QUIRE_ENV_FILE` names, stop the process
before it starts anything: one line on stderr naming each bad variable, exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from dotenv import dotenv_values
from dotenv.parser import parse_stream  # python-dotenv: what pydantic-settings reads env files with
from pydantic import ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import SettingsError

if TYPE_CHECKING:
    from app.settings import Settings

PROCESSES = ("standalone", "bookie", "broker", "compactor", "autorecovery")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quire", description="Quire ledger storage service")
    sub = parser.add_subparsers(dest="process", required=True)
    for name in PROCESSES:
        p = sub.add_parser(name, help=f"run the {name}")
        p.add_argument("--data-dir", help="data directory (QUIRE_DATA_DIR)")
        p.add_argument("--host", help="address to listen on (QUIRE_HOST)")
        p.add_argument("--port", type=int, help="HTTP port, or the bookie's port for `bookie`")
        p.add_argument("--bookie-port", type=int, help="bookie port (QUIRE_BOOKIE_PORT)")
        p.add_argument("--database-url", help="metadata store URL (QUIRE_DATABASE_URL)")
        if name == "standalone":
            p.add_argument(
                "--bookies",
                type=int,
                default=1,
                help="bookies to start, on consecutive ports from the bookie port, each with its own "
                "data directory under the data directory",
            )
            p.add_argument("--ensemble-size", type=int, help="bookies per ledger (QUIRE_ENSEMBLE_SIZE)")
            p.add_argument("--write-quorum", type=int, help="copies of each entry (QUIRE_WRITE_QUORUM)")
            p.add_argument(
                "--ack-quorum", type=int, help="acks before an add is confirmed (QUIRE_ACK_QUORUM)"
            )
        if name in ("broker", "standalone"):
            p.add_argument(
                "--kafka-port", type=int, help="Kafka listener port, 0 turns it off (QUIRE_KAFKA_PORT)"
            )
            p.add_argument(
                "--pulsar-port", type=int, help="Pulsar listener port, 0 turns it off (QUIRE_PULSAR_PORT)"
            )
        if name in ("bookie", "compactor"):
            p.add_argument(
                "--metrics-port",
                type=int,
                help=f"serve Prometheus metrics on this port at /metrics (QUIRE_{name.upper()}_METRICS_PORT)",
            )
        if name == "bookie":
            p.add_argument(
                "--format",
                action="store_true",
                help="register this bookie as a new instance: erase its journal and index and "
                "write a new cookie (after its disk was wiped or replaced)",
            )
    # Listed for `quire --help`; `quire admin ...` is handed to app.admin_cli before parsing.
    sub.add_parser("admin", help="administer a running cluster in pulsar-admin's grammar (quire admin -h)")
    sub.add_parser("tokens", help="make token keys and tokens, as `pulsar tokens` (quire tokens -h)")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["admin"]:
        raise SystemExit(_admin(arguments[1:]))
    if arguments[:1] == ["tokens"]:
        from app.auth import cli as tokens_cli

        raise SystemExit(tokens_cli.main(arguments[1:]))
    args = _parser().parse_args(arguments)
    overrides = {
        "QUIRE_DATA_DIR": args.data_dir,
        "QUIRE_HOST": args.host,
        "QUIRE_BOOKIE_PORT": args.bookie_port,
        "QUIRE_DATABASE_URL": args.database_url,
        "QUIRE_ENSEMBLE_SIZE": getattr(args, "ensemble_size", None),
        "QUIRE_WRITE_QUORUM": getattr(args, "write_quorum", None),
        "QUIRE_ACK_QUORUM": getattr(args, "ack_quorum", None),
        f"QUIRE_{args.process.upper()}_METRICS_PORT": getattr(args, "metrics_port", None),
        "QUIRE_KAFKA_PORT": getattr(args, "kafka_port", None),
        "QUIRE_PULSAR_PORT": getattr(args, "pulsar_port", None),
    }
    if args.port is not None:
        overrides["QUIRE_BOOKIE_PORT" if args.process == "bookie" else "QUIRE_PORT"] = args.port
    for key, value in overrides.items():
        if value is not None:
            os.environ[key] = str(value)
    settings = load_settings()
    module = importlib.import_module(f"app.processes.{args.process}")
    if getattr(args, "format", False):
        module.run(settings, format_disk=True)
    elif args.process == "standalone":
        module.run(settings, bookies=args.bookies)
    else:
        module.run(settings)


def _admin(argv: list[str]) -> int:
    try:
        from app import admin_cli
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("quire_client"):
            raise
        print(
            "quire admin: needs the generated client, quire_client: pip install clients/python",
            file=sys.stderr,
        )
        return 2
    return admin_cli.main(argv)


# --- settings errors: one line naming the variable, exit code 2, no traceback --------------------

PREFIX = "QUIRE_"
MAX_SHOWN_VALUE = 60


def load_settings() -> Settings:
    """The validated settings, or exit 2 with one line on stderr naming each bad variable (and
    the env file it came from): never a traceback, whatever the environment or env file holds."""
    env_file = os.environ.get("QUIRE_ENV_FILE")
    if env_file:
        _check_env_file(Path(env_file))
    from app.settings import Settings

    try:
        return Settings(_env_file=env_file)  # read now: the class default was fixed at import
    except ValidationError as exc:
        _refuse("; ".join(_describe(error, env_file) for error in exc.errors(include_url=False)))
    except SettingsError as exc:
        # pydantic-settings could not decode a complex value (a list is JSON) before validation.
        found = re.search(r'field "(\w+)"', str(exc))
        field = found.group(1) if found else "?"
        cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
        _refuse(
            f"{PREFIX}{field.upper()}={_shown(_raw(field, env_file))} ({_origin(field, env_file)}): "
            f'not valid JSON{cause}; a list is written as JSON, e.g. ["127.0.0.1:3181"]'
        )


def _check_env_file(path: Path) -> None:
    """An env file that is named must exist, be UTF-8 text, and parse line by line: python-dotenv
    would skip a missing file or a line it cannot parse with a warning and run on defaults."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _refuse(f"QUIRE_ENV_FILE={path}: cannot read it: {exc}")
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            line = binding.original.string.strip()
            _refuse(f"QUIRE_ENV_FILE={path} line {binding.original.line}: cannot parse {_shown(line)}")


def _describe(error: ErrorDetails, env_file: str | None) -> str:
    loc = error["loc"]
    message = error["msg"].removeprefix("Value error, ")
    if not loc:  # a rule across several settings: its message names them
        return message
    field = str(loc[0])
    item = "".join(f"[{part}]" for part in loc[1:])  # an item of a list, say QUIRE_BOOKIES[1]
    shown = _shown(error["input"]) if "input" in error else "?"
    if _is_secret(field):
        shown = "'**********'"  # as pydantic's SecretStr shows it: a secret is never echoed
    return f"{PREFIX}{field.upper()}{item}={shown} ({_origin(field, env_file)}): {message}"


def _is_secret(field: str) -> bool:
    from pydantic import SecretStr

    from app.settings import Settings

    info = Settings.model_fields.get(field)
    return info is not None and info.annotation is SecretStr


def _origin(field: str, env_file: str | None) -> str:
    """The field, and the env file its value came from (the environment wins over the file)."""
    if PREFIX + field.upper() not in os.environ and env_file:
        return f"{field}, from {env_file}"
    return field


def _raw(field: str, env_file: str | None) -> str:
    name = PREFIX + field.upper()
    if name in os.environ:
        return os.environ[name]
    if env_file:
        for key, value in dotenv_values(env_file, encoding="utf-8").items():
            if key.upper() == name:
                return value or ""
    return ""


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else repr(str(value))
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 4] + "...'"


def _refuse(message: str) -> NoReturn:
    one_line = " ".join(message.split())
    print(f"quire: invalid settings: {one_line}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
