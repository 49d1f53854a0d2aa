"""The `quire` command: `quire standalone|bookie|broker|compactor|autorecovery`.

Flags override the matching `QUIRE_*` settings. Each process lives in `app/processes/`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

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
        if name == "bookie":
            p.add_argument(
                "--format",
                action="store_true",
                help="register this bookie as a new instance: erase its journal and index and "
                "write a new cookie (after its disk was wiped or replaced)",
            )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    overrides = {
        "QUIRE_DATA_DIR": args.data_dir,
        "QUIRE_HOST": args.host,
        "QUIRE_BOOKIE_PORT": args.bookie_port,
        "QUIRE_DATABASE_URL": args.database_url,
        "QUIRE_ENSEMBLE_SIZE": getattr(args, "ensemble_size", None),
        "QUIRE_WRITE_QUORUM": getattr(args, "write_quorum", None),
        "QUIRE_ACK_QUORUM": getattr(args, "ack_quorum", None),
    }
    if args.port is not None:
        overrides["QUIRE_BOOKIE_PORT" if args.process == "bookie" else "QUIRE_PORT"] = args.port
    for key, value in overrides.items():
        if value is not None:
            os.environ[key] = str(value)
    from app.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"quire: invalid settings:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None
    module = importlib.import_module(f"app.processes.{args.process}")
    if getattr(args, "format", False):
        module.run(settings, format_disk=True)
    elif args.process == "standalone":
        module.run(settings, bookies=args.bookies)
    else:
        module.run(settings)


if __name__ == "__main__":
    main()
