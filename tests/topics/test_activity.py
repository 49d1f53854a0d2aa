"""The periodic checks visit the topics that changed or have a deadline (topics.activity), not
every open topic: the visit counts show it."""

from __future__ import annotations

from managed_ledger.entry_format import Message
from tests.topics.conftest import Env
from topics.activity import CHECKS
from topics.api import SubscriptionOptions
from topics.service import TopicService

N = 40


async def run_checks(svc: TopicService) -> dict[str, int]:
    """Every periodic check once; the topics each visited."""
    activity = svc.registry.activity
    before = dict(activity.visits)
    await svc.expire_by_ttl()
    await svc.check_backlog_quotas()
    await svc.check_compaction_thresholds()
    await svc.tick_stats(1.0)
    return {check: activity.visits[check] - before[check] for check in CHECKS}


async def test_an_untouched_topic_is_not_visited(svc: TopicService, env: Env) -> None:
    names = [f"public/default/t{i}" for i in range(N)]
    for name in names:
        await svc.produce(name, "p", [Message(b"x")])
    assert await run_checks(svc) == {"ttl": N, "quota": N, "compaction": N, "stats": N}
    env.clock.advance(120_000)  # the producers age out of the stats
    visited = await run_checks(svc)
    assert visited["ttl"] == visited["quota"] == visited["compaction"] == 0
    await run_checks(svc)
    assert await run_checks(svc) == dict.fromkeys(CHECKS, 0)  # all idle: nothing visited
    await svc.produce(names[7], "p", [Message(b"y")])
    assert await run_checks(svc) == dict.fromkeys(CHECKS, 1)  # the one produced to


async def test_a_topic_with_a_deadline_is_visited_until_it_is_met(svc: TopicService, env: Env) -> None:
    t = "public/default/ttl"
    await svc.create_subscription(t, "s", SubscriptionOptions("earliest"))
    await svc.produce(t, None, [Message(b"x")])
    await svc.set_policy(t, "messageTTL", 10)
    for name in (f"public/default/idle{i}" for i in range(N)):
        await svc.produce(name, None, [Message(b"x")])
    await run_checks(svc)
    env.clock.advance(1_000)
    assert (await run_checks(svc))["ttl"] == 1  # the TTL topic has a backlog: looked at again
    env.clock.advance(10_000)
    assert await svc.expire_by_ttl() == [t]  # expired at its deadline
    await run_checks(svc)  # the expiry moved the backlog: marked once more
    assert (await run_checks(svc))["ttl"] == 0  # no backlog left: no deadline
