"""Token keys: reading them from settings and files, checking that they fit the algorithms, and
making new ones (`quire tokens`).

A secret key (HS256) is written in a setting as base64, or as `file:/path` (the file holds the
raw bytes, as `quire tokens create-secret-key --output` and `pulsar tokens create-secret-key
--output` write them); Pulsar's `data:;base64,...` form is read too. A public key (RS256, ES256)
is PEM text, or `file:/path` to a PEM or DER file. Every problem is a `KeyProblem` whose message
says what is wrong and never contains the key.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

Algorithm = Literal["HS256", "RS256", "ES256"]
ALGORITHMS: tuple[Algorithm, ...] = ("HS256", "RS256", "ES256")
SECRET_KEY_BYTES = 32  # HS256: a key as long as the hash (RFC 7518 §3.2); shorter ones are refused
RSA_KEY_BITS = 2048

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class KeyProblem(ValueError):
    """A key that cannot be read or does not fit: the message names what, never the key."""


def _referenced(text: str) -> bytes | None:
    """The bytes of the file a `file:` reference names, or None when `text` is no reference."""
    if not text.startswith("file:"):
        return None
    path = Path(text.removeprefix("file://") if text.startswith("file://") else text.removeprefix("file:"))
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyProblem(f"cannot read the key file {path}: {exc.strerror}") from None


def read_secret_key(text: str) -> bytes:
    """An HS256 key from base64 text, `data:;base64,...` or `file:/path` (raw bytes)."""
    raw = _referenced(text.strip())
    if raw is None:
        # standard or URL-safe base64, padded or not
        encoded = text.strip().removeprefix("data:;base64,").replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise KeyProblem("the secret key is neither base64 nor file:/path") from None
    if len(raw) < SECRET_KEY_BYTES:
        raise KeyProblem(
            f"the secret key has {len(raw)} bytes; HS256 needs at least {SECRET_KEY_BYTES} "
            "(make one with `quire tokens create-secret-key`)"
        )
    return raw


MIN_CLUSTER_SECRET_BYTES = 16


def read_cluster_secret(text: str) -> bytes:
    """The bookie cluster secret (QUIRE_BOOKIE_AUTH_SECRET): the text's UTF-8 bytes, or the bytes
    of the file `file:/path` names without trailing line breaks; b"" (off) when `text` is empty."""
    if not text:
        return b""
    raw = _referenced(text)
    secret = raw.rstrip(b"\r\n") if raw is not None else text.encode()
    if len(secret) < MIN_CLUSTER_SECRET_BYTES:
        raise KeyProblem(
            f"the bookie secret has {len(secret)} bytes; it needs at least {MIN_CLUSTER_SECRET_BYTES} "
            "(e.g. `openssl rand -base64 32`)"
        )
    return secret


def _load_public(data: bytes) -> object:
    try:
        return serialization.load_pem_public_key(data)
    except ValueError:
        try:
            return serialization.load_der_public_key(data)
        except ValueError:
            raise KeyProblem("the public key is not a PEM or DER public key") from None


def read_public_key(text: str) -> PublicKey:
    """An RS256 or ES256 verification key from PEM text or `file:/path` (PEM or DER)."""
    raw = _referenced(text.strip())
    key = _load_public(raw if raw is not None else text.strip().encode())
    if isinstance(key, rsa.RSAPublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise KeyProblem("the public key must be an RSA key (RS256) or a P-256 EC key (ES256)")


def read_private_key(path: str) -> PrivateKey:
    """A signing key (PEM or DER, unencrypted) from a file, for `quire tokens create`."""
    raw = _referenced(path) if path.startswith("file:") else None
    if raw is None:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise KeyProblem(f"cannot read the private key file {path}: {exc.strerror}") from None
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError):
        try:
            key = serialization.load_der_private_key(raw, password=None)
        except (ValueError, TypeError):
            raise KeyProblem(f"{path} is not an unencrypted PEM or DER private key") from None
    if isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        return key
    raise KeyProblem(f"{path} is neither an RSA nor an EC private key")


def algorithm_of(key: PublicKey | PrivateKey) -> Algorithm:
    return "RS256" if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)) else "ES256"


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """What tokens are checked with: the key, and the only algorithms accepted with it."""

    key: bytes | PublicKey
    algorithms: tuple[Algorithm, ...]


def verification_key(secret_key: str, public_key: str, algorithms: list[Algorithm]) -> VerificationKey:
    """The key the settings name, with its algorithms (derived from the key when none are set).

    One kind of key only: a secret key goes with HS256 alone, a public key with the algorithm of
    its type alone, so a token signed with the public key as an HMAC secret (the algorithm
    confusion attack) or with `alg: none` never finds an algorithm that accepts it."""
    if secret_key and public_key:
        raise KeyProblem("set QUIRE_TOKEN_SECRET_KEY or QUIRE_TOKEN_PUBLIC_KEY, not both")
    if not secret_key and not public_key:
        raise KeyProblem(
            "authentication is on but no key is set: set QUIRE_TOKEN_SECRET_KEY (HS256) or "
            "QUIRE_TOKEN_PUBLIC_KEY (RS256, ES256)"
        )
    key: bytes | PublicKey
    fits: tuple[Algorithm, ...]
    if secret_key:
        key, fits = read_secret_key(secret_key), ("HS256",)
    else:
        key = read_public_key(public_key)
        fits = (algorithm_of(key),)
    wrong = [a for a in algorithms if a not in fits]
    if wrong:
        kind = "secret key (QUIRE_TOKEN_SECRET_KEY)" if secret_key else f"{fits[0][:2]} public key"
        raise KeyProblem(f"QUIRE_TOKEN_ALGORITHMS {wrong} do not fit the {kind}: it verifies {fits[0]} only")
    return VerificationKey(key, tuple(algorithms) or fits)


# --- making keys (quire tokens) -------------------------------------------------------------------


def new_secret_key() -> bytes:
    return secrets.token_bytes(SECRET_KEY_BYTES)


def new_private_key(algorithm: Algorithm) -> PrivateKey:
    if algorithm == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    raise KeyProblem(f"{algorithm} is not a key-pair algorithm: RS256 or ES256")


def private_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: PrivateKey | PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)) else key
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def write_private(path: Path, data: bytes) -> None:
    """Write key material readable by its owner only (0600 from the start, not chmod after)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
