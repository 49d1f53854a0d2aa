"""`quire admin`'s arguments, read as pulsar-admin reads them (no server: tests/api has the live test)."""

from __future__ import annotations

import argparse

import pytest

from app.admin_cli import DEFAULT_URL, parser
from app.admin_cli.base import duration_arg, or_unlimited, size_arg, topic_arg
from app.cli import main


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("persistent://acme/ns/prices", ("acme", "ns", "prices")),
        ("acme/ns/prices", ("acme", "ns", "prices")),
        ("prices", ("public", "default", "prices")),
    ],
)
def test_topic_names_as_pulsar_admin_takes_them(text: str, parts: tuple[str, str, str]) -> None:
    assert topic_arg(text) == parts


@pytest.mark.parametrize("text", ["non-persistent://a/b/c", "a/b", "a/b/c/d", "a/b/.."])
def test_bad_topic_names_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        topic_arg(text)


def test_sizes_and_durations() -> None:
    assert [size_arg(s) for s in ("4096", "10k", "10M", "16G", "3T")] == [
        4096,
        10240,
        10 << 20,
        16 << 30,
        3 << 40,
    ]
    assert [duration_arg(s) for s in ("30", "500ms", "100m", "3h", "2d", "1w")] == [
        30_000,
        500,
        6_000_000,
        10_800_000,
        172_800_000,
        604_800_000,
    ]
    assert or_unlimited(size_arg)("-1") == -1
    for bad in ("-1", "ten", "10X", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            size_arg(bad)


def test_url_comes_from_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("QUIRE_ADMIN_URL", raising=False)
    assert parser().parse_args(["tenants", "list"]).url == DEFAULT_URL
    monkeypatch.setenv("QUIRE_ADMIN_URL", "http://broker-2:8080/")
    assert parser().parse_args(["tenants", "list"]).url == "http://broker-2:8080"
    assert parser().parse_args(["tenants", "list", "--url", "http://b3:80"]).url == "http://b3:80"


def test_quire_hands_admin_to_the_admin_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["admin", "topics", "list"])
    assert exit_info.value.code == 2
    assert "usage: quire admin topics list" in capsys.readouterr().err


def test_whole_topic_commands_take_pulsar_admin_arguments() -> None:
    terminate = parser().parse_args(["topics", "terminate", "prices"])
    assert terminate.topic == ("public", "default", "prices")
    before = parser().parse_args(["topics", "truncate-before", "acme/ns/t", "-m", "7:3:1"])
    assert before.topic == ("acme", "ns", "t") and before.message_id == "7:3:1"
    with pytest.raises(SystemExit):
        parser().parse_args(["topics", "truncate-before", "acme/ns/t"])  # -m is required


def test_backlog_quota_and_namespace_policy_commands_read_pulsar_admins_flags() -> None:
    args = parser().parse_args(
        ["topics", "set-backlog-quota", "t", "-l", "10M", "-lt", "1h", "-p", "producer_exception"]
    )
    assert (args.topic, args.limit, args.limit_time, args.policy, args.quota_type) == (
        ("public", "default", "t"),
        10 << 20,
        3_600_000,
        "producer_exception",
        "destination_storage",
    )
    args = parser().parse_args(["namespaces", "remove-backlog-quota", "a/b", "-t", "message_age"])
    assert (args.namespace, args.quota_type) == (("a", "b"), "message_age")
    args = parser().parse_args(["namespaces", "set-message-ttl", "a/b", "--messageTTL", "2h"])
    assert args.ttl == 7_200_000
    args = parser().parse_args(["namespaces", "set-retention", "a/b", "-s", "1G"])
    assert (args.size, args.time) == (1 << 30, None)
    for bad in (
        ["topics", "set-backlog-quota", "t", "-l", "10M", "-p", "drop"],
        ["namespaces", "set-backlog-quota", "a/b", "-l", "1M", "-p", "producer_exception", "-t", "size"],
        ["namespaces", "set-deduplication", "a/b"],
    ):
        with pytest.raises(SystemExit):
            parser().parse_args(bad)


def test_compaction_policy_commands_send_only_the_flags_given() -> None:
    from app.admin_cli.base import ratio_arg
    from app.admin_cli.policies import compaction_policy_body

    args = parser().parse_args(["topics", "set-compaction-policy", "t", "-d", "1d", "-r", "0.5"])
    assert args.topic == ("public", "default", "t")
    assert compaction_policy_body(args).to_dict() == {
        "deleteRetentionMs": 86_400_000,
        "minCleanableDirtyRatio": 0.5,
    }
    args = parser().parse_args(["namespaces", "set-compaction-policy", "a/b", "-k", "keep", "-l", "10m"])
    assert args.namespace == ("a", "b")
    assert compaction_policy_body(args).to_dict() == {"keylessPolicy": "keep", "maxLagMs": 600_000}
    for command in ("get-compaction-policy", "remove-compaction-policy"):
        assert parser().parse_args(["topics", command, "t"]).topic == ("public", "default", "t")
        assert parser().parse_args(["namespaces", command, "a/b"]).namespace == ("a", "b")
    assert [ratio_arg(r) for r in ("0", "0.25", "1")] == [0.0, 0.25, 1.0]
    for bad in ("1.5", "-0.1", "nan", "half"):
        with pytest.raises(argparse.ArgumentTypeError):
            ratio_arg(bad)
    for bad_args in (
        ["topics", "set-compaction-policy", "t", "-k", "shred"],
        ["topics", "set-compaction-policy", "t", "-r", "2"],
        ["namespaces", "set-compaction-policy", "a/b", "-d", "-5"],
    ):
        with pytest.raises(SystemExit):
            parser().parse_args(bad_args)


def test_kafka_group_commands() -> None:
    assert parser().parse_args(["kafka-groups", "list"]).command == "list"
    args = parser().parse_args(["kafka-groups", "get", "billing"])
    assert (args.command, args.group) == ("get", "billing")
    with pytest.raises(SystemExit):
        parser().parse_args(["kafka-groups", "delete"])  # the group is required
