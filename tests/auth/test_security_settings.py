"""Security settings that contradict each other refuse to start; secrets are never shown; and
`quire tokens` makes keys and tokens the broker's settings accept."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from app.auth import cli as tokens_cli
from app.auth.tokens import TokenRefused, TokenVerifier
from app.cli import main
from app.settings import Settings

SECRET_B64 = base64.b64encode(b"k" * 32).decode()


def _env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(f"QUIRE_{name.upper()}", value)


def _refusal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **values: str) -> str:
    _env(monkeypatch, **values)
    with pytest.raises(SystemExit) as info:
        main(["broker"])
    assert info.value.code == 2
    return capsys.readouterr().err


def _public_key_file(tmp_path: Path, algorithm: str = "RS256") -> Path:
    private, public = tmp_path / "private.pem", tmp_path / "public.pem"
    argv = ["create-key-pair", "-a", algorithm, "--output-private-key", str(private)]
    assert tokens_cli.main([*argv, "--output-public-key", str(public)]) == 0
    return public


def test_authentication_is_off_by_default() -> None:
    settings = Settings()
    assert not settings.authentication_enabled
    assert not settings.effective_authorization_enabled


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"authentication_enabled": "true"}, "no key is set"),
        ({"authorization_enabled": "true"}, "needs authentication_enabled"),
        (
            {
                "authentication_enabled": "true",
                "token_secret_key": SECRET_B64,
                "token_algorithms": '["RS256"]',
            },
            "do not fit",
        ),
        ({"authentication_enabled": "true", "token_secret_key": "c2hvcnQ="}, "at least 32"),
        ({"authentication_enabled": "true", "token_secret_key": "%%%"}, "neither base64"),
        ({"authentication_enabled": "true", "token_secret_key": "file:/nonexistent/k"}, "cannot read"),
        ({"authentication_enabled": "true", "token_public_key": "-----BEGIN junk"}, "not a PEM"),
        ({"authentication_enabled": "true", "token_secret_key": SECRET_B64}, "super_user_roles is empty"),
        ({"token_algorithms": '["HS512"]'}, "token_algorithms"),
    ],
)
def test_contradictions_refuse_to_start(
    values: dict[str, str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _refusal(monkeypatch, capsys, **values)
    assert says in err
    assert SECRET_B64 not in err


def test_hs_key_with_an_rs_public_key_too_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    public = _public_key_file(tmp_path)
    err = _refusal(
        monkeypatch,
        capsys,
        authentication_enabled="true",
        token_secret_key=SECRET_B64,
        token_public_key=f"file:{public}",
    )
    assert "not both" in err


def test_an_rs_key_refuses_es_algorithms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    public = _public_key_file(tmp_path)
    err = _refusal(
        monkeypatch,
        capsys,
        authentication_enabled="true",
        token_public_key=f"file:{public}",
        token_algorithms='["ES256"]',
        super_user_roles='["admin"]',
    )
    assert "RS256 only" in err


def test_a_secret_that_is_not_valid_is_not_echoed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refusal(monkeypatch, capsys, authentication_enabled="true", token_secret_key="hunter2-hunter2")
    assert "hunter2" not in err


def test_settings_repr_and_dump_mask_the_secret() -> None:
    settings = Settings(authentication_enabled=True, token_secret_key=SECRET_B64, super_user_roles=["admin"])
    assert SECRET_B64 not in repr(settings)
    assert SECRET_B64 not in str(settings.model_dump())
    assert SECRET_B64 not in settings.model_dump_json()


def test_authentication_without_authorization_is_allowed() -> None:
    settings = Settings(authentication_enabled=True, authorization_enabled=False, token_secret_key=SECRET_B64)
    assert settings.authentication_enabled and not settings.effective_authorization_enabled


# --- quire tokens ---------------------------------------------------------------------------------


def test_secret_key_printed_in_base64_verifies_the_tokens_made_with_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert tokens_cli.main(["create-secret-key"]) == 0
    key = capsys.readouterr().out.strip()
    assert tokens_cli.main(["create", "--subject", "alice", "--secret-key", key, "--expiry-time", "1h"]) == 0
    token = capsys.readouterr().out.strip()
    settings = Settings(authentication_enabled=True, token_secret_key=key, super_user_roles=["admin"])
    assert TokenVerifier(settings.token_verification_key()).role(token) == "alice"


def test_secret_key_file_is_private_and_read_with_file_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "secret.key"
    assert tokens_cli.main(["create-secret-key", "--output", str(path)]) == 0
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(path.read_bytes()) == 32
    assert tokens_cli.main(["create", "-s", "bob", "-sk", f"file:{path}"]) == 0
    token = capsys.readouterr().out.strip()
    settings = Settings(authentication_enabled=True, token_secret_key=f"file:{path}", super_user_roles=["a"])
    assert TokenVerifier(settings.token_verification_key()).role(token) == "bob"
    other = Settings(authentication_enabled=True, token_secret_key=SECRET_B64, super_user_roles=["a"])
    with pytest.raises(TokenRefused):
        TokenVerifier(other.token_verification_key()).role(token)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_key_pair_signs_tokens_the_public_key_verifies(
    algorithm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    public = _public_key_file(tmp_path, algorithm)
    assert (tmp_path / "private.pem").stat().st_mode & 0o777 == 0o600
    assert tokens_cli.main(["create", "-s", "carol", "--private-key", str(tmp_path / "private.pem")]) == 0
    token = capsys.readouterr().out.strip()
    settings = Settings(
        authentication_enabled=True, token_public_key=public.read_text(), super_user_roles=["admin"]
    )
    key = settings.token_verification_key()
    assert key.algorithms == (algorithm,)
    assert TokenVerifier(key).role(token) == "carol"


def test_bad_key_is_exit_1_and_bad_usage_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tokens_cli.main(["create", "-s", "x", "--private-key", str(tmp_path / "missing.pem")]) == 1
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        tokens_cli.main(["create", "-s", "x"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        tokens_cli.main(["create", "-s", "x", "-sk", SECRET_B64, "--expiry-time", "soon"])
    assert info.value.code == 2


def test_quire_tokens_is_reached_from_the_quire_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["tokens", "create-secret-key"])
    assert info.value.code == 0
    assert len(base64.b64decode(capsys.readouterr().out.strip())) == 32
