"""`quire admin` against a live bookie + broker (one stack for the module), checking its output, its
stderr and its exit status (0 done, 1 refused, 2 bad usage).

The grammar's tests run the CLI's `main` in this process over real HTTP (`admin`): a new
interpreter per command costs about a second of CPU and several seconds on a loaded machine, and
these tests run about seventy commands. The exit-status tests run it as a user does, `python -m
app.cli admin` in a subprocess (`admin_process`), so the entry point and its exit codes are
covered end to end."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx
import pytest

from app.admin_cli import main as admin_main
from tests.api.conftest import Stack
from tests.support import REPO, free_port

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    """One command through the CLI's `main` in this process: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = admin_main(list(args))
        except SystemExit as exc:  # argparse's bad usage
            status = exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return subprocess.CompletedProcess(["quire", "admin", *args], status, out.getvalue(), err.getvalue())


def admin_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One command as a user runs it: `python -m app.cli admin` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "admin", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(stack: Stack, *args: str) -> Any:
    """Run a command that must succeed; its JSON output (None when it printed nothing)."""
    done = admin("--url", stack.base_url, *args)
    assert done.returncode == EXIT_OK, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_topic_from_create_to_delete(stack: Stack) -> None:
    name = f"t-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{name}"
    assert ok(stack, "topics", "create", topic) is None
    assert ok(stack, "topics", "create", f"public/default/{name}-p", "-p", "2") is None
    listed = ok(stack, "topics", "list", "public/default")
    assert topic in listed and f"{topic}-p" in listed
    assert ok(stack, "topics", "get-partitioned-topic-metadata", f"{name}-p") == {"partitions": 2}
    pstats = ok(stack, "topics", "partitioned-stats", f"{name}-p")
    assert sorted(pstats["partitions"]) == [f"public/default/{name}-p-partition-{i}" for i in range(2)]
    assert pstats["metadata"] == {"partitions": 2} and pstats["msgInCounter"] == 0

    ok(stack, "topics", "create-subscription", topic, "-s", "sub-a", "-m", "earliest")
    assert ok(stack, "topics", "subscriptions", topic) == ["sub-a"]
    stats = ok(stack, "topics", "stats", topic)
    assert stats["subscriptions"]["sub-a"]["msgBacklog"] == 0
    assert stats["ownerBroker"] == stack.base_url.removeprefix("http://")

    ok(stack, "topics", "unsubscribe", topic, "-s", "sub-a")
    assert ok(stack, "topics", "subscriptions", topic) == []
    ok(stack, "topics", "delete", topic)
    ok(stack, "topics", "delete", f"{topic}-p")
    listed = ok(stack, "topics", "list", "public/default")
    assert topic not in listed and f"{topic}-p" not in listed


def test_policy_set_then_get(stack: Stack) -> None:
    topic = f"public/default/pol-{uuid.uuid4().hex[:8]}"
    ok(stack, "topics", "create", topic)
    ok(stack, "topics", "set-retention", topic, "-s", "10M", "-t", "3h")
    # the URL from the environment, and --url after the command: both as pulsar-admin users expect
    by_env = admin_process("topics", "get-retention", topic, env={"QUIRE_ADMIN_URL": stack.base_url})
    assert by_env.returncode == EXIT_OK, by_env.stderr
    assert json.loads(by_env.stdout) == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10}
    ok(stack, "topics", "set-deduplication", topic, "--enable")
    trailing = admin("topics", "get-deduplication", topic, "--url", stack.base_url)
    assert trailing.returncode == EXIT_OK, trailing.stderr
    assert json.loads(trailing.stdout) is True


def test_backlog_commands_message_ttl_and_partition_growth(stack: Stack) -> None:
    name = f"bk-{uuid.uuid4().hex[:8]}"
    topic = f"public/default/{name}"
    produced = httpx.post(
        f"{stack.base_url}/v1/topics/{topic}/messages",
        json={"messages": [{"value": f"m{i}"} for i in range(5)]},
        timeout=30,
    )
    assert produced.status_code == 200, produced.text
    ids = [r["message_id"] for r in produced.json()["results"]]
    ok(stack, "topics", "create-subscription", topic, "-s", "s", "-m", "earliest")
    assert [m["value"] for m in ok(stack, "topics", "peek-messages", topic, "-s", "s", "-n", "3")] == [
        "m0",
        "m1",
        "m2",
    ]
    ok(stack, "topics", "skip", topic, "-s", "s", "-n", "2")
    assert [m["value"] for m in ok(stack, "topics", "peek-messages", topic, "-s", "s", "-n", "9")] == [
        "m2",
        "m3",
        "m4",
    ]
    # one batch is one entry: the first message of the first entry
    assert ok(stack, "topics", "examine-message", topic, "-i", "earliest", "-m", "1")["value"] == "m0"
    ok(stack, "topics", "create-subscription", topic, "-s", "at", "-m", ids[3])
    assert ok(stack, "topics", "peek-messages", topic, "-s", "at")[0]["value"] == "m3"
    ok(stack, "topics", "expire-messages", topic, "-t", "0")  # every subscription
    empty = admin("--url", stack.base_url, "topics", "peek-messages", topic, "-s", "s")
    assert empty.returncode == EXIT_REFUSED and " 404 " in empty.stderr, empty.stderr
    ok(stack, "topics", "set-message-ttl", topic, "-t", "1h")
    assert ok(stack, "topics", "get-message-ttl", topic) == 3600
    ok(stack, "topics", "remove-message-ttl", topic)
    assert ok(stack, "topics", "get-message-ttl", topic) == 0
    ok(stack, "topics", "create", f"{topic}-p", "-p", "2")
    ok(stack, "topics", "update-partitioned-topic", f"{topic}-p", "-p", "3")
    assert ok(stack, "topics", "get-partitioned-topic-metadata", f"{topic}-p") == {"partitions": 3}
    fewer = admin("--url", stack.base_url, "topics", "update-partitioned-topic", f"{topic}-p", "-p", "2")
    assert fewer.returncode == EXIT_REFUSED and " 409 " in fewer.stderr, fewer.stderr


def test_terminate_truncate_and_truncate_before(stack: Stack) -> None:
    topic = f"public/default/ops-{uuid.uuid4().hex[:8]}"
    url = f"{stack.base_url}/v1/topics/{topic}/messages"
    produced = httpx.post(url, json={"messages": [{"value": f"m{i}"} for i in range(4)]}, timeout=30)
    assert produced.status_code == 200, produced.text
    ids = [r["message_id"] for r in produced.json()["results"]]
    ok(stack, "topics", "truncate-before", topic, "-m", ids[2])
    page = httpx.get(url, params={"start": "earliest"}, timeout=30).json()
    assert [m["value"] for m in page["messages"]] == ["m2", "m3"]
    beyond = admin("--url", stack.base_url, "topics", "truncate-before", topic, "-m", "999999:0:0")
    assert beyond.returncode == EXIT_REFUSED and " 422 " in beyond.stderr, beyond.stderr
    ok(stack, "topics", "truncate", topic)
    assert httpx.get(url, params={"start": "earliest"}, timeout=30).json()["messages"] == []
    # truncate left no message: terminate answers null (docs/semantics.md)
    assert ok(stack, "topics", "terminate", topic) == {"messageId": None, "partitions": {}}
    refused = httpx.post(url, json={"messages": [{"value": "late"}]}, timeout=30)
    assert refused.status_code == 409 and refused.json()["type"].endswith("/topic-terminated")


def test_brokers_list(stack: Stack) -> None:
    brokers = ok(stack, "brokers", "list")
    assert [b["httpUrl"] for b in brokers] == [stack.base_url]


def test_bookies_list(stack: Stack) -> None:
    bookies = ok(stack, "bookies", "list")["bookies"]
    assert [(b["bookieId"], b["state"]) for b in bookies] == [(f"127.0.0.1:{stack.bookie_port}", "writable")]


def test_the_only_bookie_cannot_be_decommissioned_and_a_cancel_is_harmless(stack: Stack) -> None:
    only = f"127.0.0.1:{stack.bookie_port}"
    done = admin("--url", stack.base_url, "bookies", "decommission", only)
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert "409" in done.stderr and "start another bookie first" in done.stderr, done.stderr
    assert ok(stack, "bookies", "cancel-decommission", only) is None
    assert [b["state"] for b in ok(stack, "bookies", "list")["bookies"]] == ["writable"]
    # ... and produce still works: nothing was taken out.
    r = httpx.post(f"{stack.base_url}/v1/topics/public/default/after-decommission/messages",
                   json={"messages": [{"value": "x"}]}, timeout=30)  # fmt: skip
    assert r.status_code == 200, r.text


def test_kafka_groups(stack: Stack) -> None:
    assert ok(stack, "kafka-groups", "list") == []
    for command in ("get", "delete"):
        done = admin("--url", stack.base_url, "kafka-groups", command, "no-such-group")
        assert done.returncode == EXIT_REFUSED
        assert done.stderr.startswith("quire admin: 404 Group not found: "), done.stderr


def test_unknown_topic_is_exit_1_with_the_problem_on_one_line(stack: Stack) -> None:
    done = admin_process("--url", stack.base_url, "topics", "stats", "public/default/no-such-topic")
    assert done.returncode == EXIT_REFUSED
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("quire admin: 404 Topic not found: ")
    assert "public/default/no-such-topic" in done.stderr


def test_unreachable_broker_is_exit_1() -> None:
    done = admin_process("--url", f"http://127.0.0.1:{free_port()}", "tenants", "list")
    assert done.returncode == EXIT_REFUSED
    assert done.stderr.startswith("quire admin: cannot reach ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["topics", "frob", "x"], "invalid choice: 'frob'"),
        (["topics", "stats", "non-persistent://public/default/x"], "only persistent:// topics"),
        (["topics", "set-retention", "x", "-s", "10X", "-t", "1h"], "'10X' is not a size"),
        (["topics", "unsubscribe", "x"], "-s/--subscription"),
    ],
)
def test_bad_usage_is_exit_2(args: list[str], said: str) -> None:
    done = admin("--url", f"http://127.0.0.1:{free_port()}", *args)  # never reaches a server
    assert done.returncode == EXIT_USAGE
    assert "usage: quire admin" in done.stderr and said in done.stderr, done.stderr


def test_namespace_policies_and_backlog_quotas(stack: Stack) -> None:
    ns = f"public/ns-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{ns}/quota"
    ok(stack, "namespaces", "create", ns)
    ok(stack, "topics", "create", topic)
    ok(stack, "namespaces", "set-retention", ns, "-t", "2h")
    assert ok(stack, "namespaces", "get-retention", ns) == {
        "retentionTimeInMinutes": 120,
        "retentionSizeInMB": 0,
    }
    assert ok(stack, "topics", "get-retention", topic)["retentionTimeInMinutes"] == 120
    ok(stack, "namespaces", "set-message-ttl", ns, "-ttl", "1h")
    assert ok(stack, "topics", "get-message-ttl", topic) == 3600
    ok(stack, "namespaces", "set-deduplication", ns, "--enable")
    assert ok(stack, "namespaces", "get-deduplication", ns) is True
    ok(stack, "namespaces", "set-compaction-threshold", ns, "-t", "10M")
    assert ok(stack, "namespaces", "get-compaction-threshold", ns) == 10 << 20
    ok(stack, "namespaces", "set-rollover-policy", ns, "--max-entries", "100")
    assert ok(stack, "namespaces", "get-rollover-policy", ns)["maxEntriesPerLedger"] == 100
    # on the topic too, a field at a time: the others keep their effective value (issue 22)
    ok(stack, "topics", "set-rollover-policy", topic, "--min-time", "0")
    assert ok(stack, "topics", "get-rollover-policy", topic) == {
        **ok(stack, "namespaces", "get-rollover-policy", ns),
        "minRolloverTimeMs": 0,
    }
    ok(stack, "namespaces", "remove-retention", ns)
    assert ok(stack, "topics", "get-retention", topic)["retentionTimeInMinutes"] == 0

    ok(
        stack,
        "namespaces",
        "set-backlog-quota",
        ns,
        "-lt",
        "1h",
        "-p",
        "producer_request_hold",
        "-t",
        "message_age",
    )
    ok(stack, "topics", "set-backlog-quota", topic, "-l", "10M", "-p", "producer_exception")
    assert ok(stack, "topics", "get-backlog-quotas", topic) == {
        "destination_storage": {"limitSize": 10 << 20, "limitTime": None, "policy": "producer_exception"},
        "message_age": {"limitSize": None, "limitTime": 3600, "policy": "producer_request_hold"},
    }
    ok(stack, "topics", "remove-backlog-quota", topic)
    ok(stack, "namespaces", "remove-backlog-quota", ns, "-t", "message_age")
    assert ok(stack, "topics", "get-backlog-quotas", topic) == {}
    assert ok(stack, "namespaces", "get-backlog-quotas", ns) == {}
    refused = admin("--url", stack.base_url, "topics", "set-backlog-quota", topic, "-p", "producer_exception")
    assert refused.returncode == EXIT_REFUSED and "422" in refused.stderr and "limitSize" in refused.stderr


def test_schemas_upload_get_and_delete(stack: Stack, tmp_path: Any) -> None:
    topic = f"public/default/schemas-{uuid.uuid4().hex[:8]}"
    definition = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
    payload = tmp_path / "order.json"
    payload.write_text(
        json.dumps({"type": "AVRO", "schema": json.dumps(definition), "properties": {"a": "b"}})
    )
    assert ok(stack, "schemas", "upload", topic, "-f", str(payload)) == {"version": 0}
    assert ok(stack, "schemas", "upload", topic, "-f", str(payload)) == {"version": 0}
    got = ok(stack, "schemas", "get", topic)
    assert got["version"] == 0 and got["type"] == "AVRO" and got["properties"] == {"a": "b"}
    assert json.loads(got["data"]) == definition
    assert ok(stack, "schemas", "get", topic, "--version", "0")["version"] == 0
    assert [v["version"] for v in ok(stack, "schemas", "get", topic, "-a")["getSchemaResponses"]] == [0]
    assert ok(stack, "schemas", "delete", topic) == {"version": 1}
    done = admin("--url", stack.base_url, "schemas", "get", topic)
    assert done.returncode == EXIT_REFUSED
    assert done.stderr.startswith("quire admin: 404 Schema not found: "), done.stderr
    payload.write_text("{not json")
    done = admin("--url", stack.base_url, "schemas", "upload", topic, "-f", str(payload))
    assert done.returncode == EXIT_REFUSED and "not a schema payload" in done.stderr
