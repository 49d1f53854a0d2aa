"""`python -m migrations upgrade|current|heads [--database-url URL]`: the metadata schema by hand.

Every Quire process upgrades the schema itself at start unless auto-migrate is off; this is for
operators who turn that off and migrate as a deliberate step.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m migrations", description=__doc__)
    parser.add_argument("command", choices=("upgrade", "current", "head"))
    parser.add_argument("--database-url", default=os.environ.get("QUIRE_DATABASE_URL", ""))
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("no database URL: pass --database-url or set QUIRE_DATABASE_URL")
    from managed_ledger.metadata import schema

    if args.command == "upgrade":
        schema.upgrade_to_head(args.database_url)
        print(f"metadata schema at revision {schema.current_revision(args.database_url)}")
    elif args.command == "current":
        print(schema.current_revision(args.database_url) or "(empty database)")
    else:
        print(schema.head_revision())
    return 0


if __name__ == "__main__":
    sys.exit(main())
