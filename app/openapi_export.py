"""Write the app's OpenAPI spec: `python -m app.openapi_export openapi.json` (`make openapi`).

The committed openapi.json is what clients are generated from; tests/api/test_openapi.py fails
when it differs from what the app serves.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import orjson

from app.main import create_app
from topics.api import TopicsApi


def spec() -> dict[str, Any]:
    # The spec depends on the routes only: no service is built or called.
    return create_app(cast(TopicsApi, object()), close_topics=False).openapi()


def render() -> bytes:
    return orjson.dumps(spec(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "openapi.json")
    out.write_bytes(render())
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
