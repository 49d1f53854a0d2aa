"""`quire tokens`: keys and tokens for token authentication, as `pulsar tokens` makes them.

    quire tokens create-secret-key [--output FILE]
    quire tokens create-key-pair --output-private-key F --output-public-key F [-a RS256|ES256]
    quire tokens create --subject ROLE [--expiry-time 1h] (--secret-key K | --private-key F)

A secret key is printed in base64 (the form QUIRE_TOKEN_SECRET_KEY takes), or written raw to
`--output` (then QUIRE_TOKEN_SECRET_KEY=file:FILE). Key files are created readable by their owner
only. A token is printed on stdout and nowhere else. Exit status: 0 done, 1 a key could not be
read, 2 bad usage. See the README's "Security".
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from app.auth import keys
from app.auth.tokens import create_token

PROG = "quire tokens"
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def expiry_arg(text: str) -> int:
    """Seconds: `3600` (seconds), `30m`, `1h`, `7d`, `2w`, `1y` (Pulsar's --expiry-time)."""
    found = re.fullmatch(r"(\d+)\s*([smhdwy]?)", text.strip(), re.IGNORECASE)
    if found is None or int(found[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: e.g. 3600, 30m, 1h, 7d, 1y")
    return int(found[1]) * _SECONDS[found[2].lower() or "s"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description="Keys and tokens for Quire's token authentication.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    secret = commands.add_parser("create-secret-key", help="a new HS256 secret key")
    secret.add_argument("--output", type=Path, help="write the raw key here (else print it in base64)")
    secret.set_defaults(run=_create_secret_key)

    pair = commands.add_parser("create-key-pair", help="a new RS256 or ES256 key pair")
    pair.add_argument("-a", "--signature-algorithm", choices=["RS256", "ES256"], default="RS256")
    pair.add_argument("--output-private-key", type=Path, required=True, help="PEM, signs tokens")
    pair.add_argument(
        "--output-public-key", type=Path, required=True, help="PEM, for QUIRE_TOKEN_PUBLIC_KEY=file:F"
    )
    pair.set_defaults(run=_create_key_pair)

    token = commands.add_parser("create", help="a token whose role is --subject")
    token.add_argument("-s", "--subject", required=True, help="the role (the token's sub claim)")
    token.add_argument(
        "-e", "--expiry-time", "--expiry", type=expiry_arg, help="e.g. 1h, 7d, 1y (default: never)"
    )
    signer = token.add_mutually_exclusive_group(required=True)
    signer.add_argument("-sk", "--secret-key", help="base64, or file:/path (HS256)")
    signer.add_argument("-pk", "--private-key", help="a PEM or DER private key file (RS256, ES256)")
    token.set_defaults(run=_create_token)
    return top


def _create_secret_key(args: argparse.Namespace) -> None:
    key = keys.new_secret_key()
    if args.output is None:
        print(base64.b64encode(key).decode())
    else:
        keys.write_private(args.output, key)


def _create_key_pair(args: argparse.Namespace) -> None:
    private = keys.new_private_key(args.signature_algorithm)
    keys.write_private(args.output_private_key, keys.private_pem(private))
    args.output_public_key.write_bytes(keys.public_pem(private))


def _create_token(args: argparse.Namespace) -> None:
    if not args.subject.strip():
        raise keys.KeyProblem("--subject must not be empty")
    if args.secret_key is not None:
        signing: bytes | keys.PrivateKey = keys.read_secret_key(args.secret_key)
        algorithm: keys.Algorithm = "HS256"
    else:
        signing = keys.read_private_key(args.private_key)
        algorithm = keys.algorithm_of(signing)
    print(create_token(args.subject, signing, algorithm, args.expiry_time))


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except (keys.KeyProblem, OSError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return 0
