"""Token verification: what is accepted, what is refused and why, and the cache of verified tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import jwt
import pytest

from app.auth import keys
from app.auth.keys import VerificationKey
from app.auth.tokens import TokenRefused, TokenVerifier, bearer_token, create_token

SECRET = b"s" * 32
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    """A token signed by hand (PyJWT refuses to sign some of the attacks below)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def hs_verifier(clock: Clock | None = None, cache_size: int = 100) -> TokenVerifier:
    return TokenVerifier(VerificationKey(SECRET, ("HS256",)), cache_size=cache_size, clock=clock or Clock())


def refused(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(TokenRefused) as info:
        verifier.role(token)
    reason = str(info.value)
    assert not token or token not in reason
    return reason


def test_a_valid_token_names_its_role_and_is_verified_once() -> None:
    verifier = hs_verifier()
    token = create_token("alice", SECRET, "HS256", 3600, clock=Clock())
    assert verifier.role(token) == "alice"
    assert verifier.role(token) == "alice"
    assert verifier.verifications == 1


def test_expired_token_is_refused() -> None:
    token = create_token("alice", SECRET, "HS256", 10, clock=lambda: NOW - 60)
    assert "expired" in refused(hs_verifier(), token)


def test_token_not_valid_yet_is_refused() -> None:
    token = jwt.encode({"sub": "alice", "nbf": int(NOW) + 600}, SECRET, algorithm="HS256")
    assert "not valid yet" in refused(hs_verifier(), token)


def test_tampered_payload_is_refused() -> None:
    token = create_token("alice", SECRET, "HS256")
    header, _, signature = token.split(".")
    forged = f"{header}.{_b64(json.dumps({'sub': 'admin'}).encode())}.{signature}"
    assert "signature" in refused(hs_verifier(), forged)


def test_alg_none_is_refused() -> None:
    header, claims = json.dumps({"alg": "none", "typ": "JWT"}), json.dumps({"sub": "admin"})
    unsigned = f"{_b64(header.encode())}.{_b64(claims.encode())}."
    assert "algorithm" in refused(hs_verifier(), unsigned)


def test_another_key_is_refused() -> None:
    token = create_token("alice", b"t" * 32, "HS256")
    assert "signature" in refused(hs_verifier(), token)


def test_hs256_signed_with_the_public_key_is_refused() -> None:
    """The algorithm confusion attack: the public key (known to all) used as an HMAC secret."""
    private = keys.new_private_key("RS256")
    public = keys.read_public_key(keys.public_pem(private).decode())
    verifier = TokenVerifier(VerificationKey(public, ("RS256",)))
    assert verifier.role(create_token("alice", private, "RS256")) == "alice"
    forged = _hs256({"alg": "HS256", "typ": "JWT"}, {"sub": "admin"}, keys.public_pem(private))
    assert "algorithm" in refused(verifier, forged)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_key_pairs_sign_and_verify(algorithm: keys.Algorithm) -> None:
    private = keys.new_private_key(algorithm)
    verifier = TokenVerifier(keys.verification_key("", keys.public_pem(private).decode(), []))
    assert verifier.role(create_token("bob", private, algorithm)) == "bob"
    other = keys.new_private_key(algorithm)
    assert "signature" in refused(verifier, create_token("bob", other, algorithm))


def test_es256_token_is_refused_by_an_rs256_key() -> None:
    rsa_key = keys.new_private_key("RS256")
    verifier = TokenVerifier(keys.verification_key("", keys.public_pem(rsa_key).decode(), []))
    ec_token = create_token("bob", keys.new_private_key("ES256"), "ES256")
    assert "algorithm" in refused(verifier, ec_token)


@pytest.mark.parametrize(
    ("claims", "reason"),
    [({"role": "alice"}, "sub"), ({"sub": 42}, "sub"), ({"sub": ""}, "empty")],
)
def test_a_token_without_a_role_is_refused(claims: dict[str, Any], reason: str) -> None:
    assert reason in refused(hs_verifier(), jwt.encode(claims, SECRET, algorithm="HS256"))


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "x" * 10_000])
def test_garbage_is_refused_as_malformed(token: str) -> None:
    assert "malformed" in refused(hs_verifier(), token)


def test_the_cache_honours_exp_without_verifying_again() -> None:
    clock = Clock()
    verifier = hs_verifier(clock)
    token = create_token("alice", SECRET, "HS256", 60, clock=clock)
    assert verifier.role(token) == "alice"
    clock.now += 59
    assert verifier.role(token) == "alice"
    clock.now += 1
    assert "expired" in refused(verifier, token)
    assert "expired" in refused(verifier, token)  # verified again now, and refused by PyJWT
    assert verifier.verifications == 2


def test_the_cache_is_bounded_and_keeps_the_recently_used() -> None:
    verifier = hs_verifier(cache_size=2)
    a, b, c = (create_token(role, SECRET, "HS256") for role in "abc")
    for token in (a, b, a, c):  # c evicts b, the least recently used
        verifier.role(token)
    assert verifier.verifications == 3
    verifier.role(a)
    assert verifier.verifications == 3
    verifier.role(b)
    assert verifier.verifications == 4


def test_the_cache_keys_are_hashes_not_tokens() -> None:
    verifier = hs_verifier()
    token = create_token("alice", SECRET, "HS256")
    verifier.role(token)
    assert token not in repr(vars(verifier))


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        (b"", None),
        (b"Bearer abc.def.ghi", "abc.def.ghi"),
        (b"bearer  abc ", "abc"),
        (b"Basic dXNlcjpwdw==", None),
        (b"Bearer", None),
    ],
)
def test_bearer_header(header: bytes | None, token: str | None) -> None:
    assert bearer_token(header) == token
