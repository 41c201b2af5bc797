"""Kafka's follower quota fetch by fetch (engine.whatif.turns): the rule as read from Kafka 4.0's source.

What docs/simulator.md says of Kafka's rule rests on these: the quota's early burst, what a fetcher that
backs off loses, how fetchers in step share the quota, and how a follower re-added at a new leader epoch
waits for its fetcher's turn.
"""

import pytest

from engine.whatif.turns import BACKOFF_MS, FORGET_MS, Fetcher, SampledRate, run

MiB = 1 << 20
RATE = 4e6


def passes_at_once(q: SampledRate, t: int) -> float:
    """Bytes a fetcher gets through ``q`` from ``t`` on, 1 MiB every 10 ms, before it is first refused."""
    passed = 0.0
    while not q.exceeded(t):
        q.record(t, MiB)
        passed += MiB
        t += 10
    return passed


def test_a_quota_that_starts_recording_lets_one_sample_window_through():
    # SimpleRate divides by at least one window: 4 MB pass, the fifth MiB is refused
    assert passes_at_once(SampledRate(RATE), 0) / RATE == pytest.approx(1.0, abs=MiB / RATE)


def test_a_quota_that_recorded_empty_fetches_for_its_window_lets_it_all_through():
    # the rate is measured from the oldest kept sample: 11 windows (and the one being filled) of nothing
    q = SampledRate(RATE)
    for t in range(0, 20_000, 500):
        q.record(t, 0)
    assert passes_at_once(q, 20_000) / RATE == pytest.approx(11.5, abs=0.3)


def test_a_sample_with_no_record_for_the_whole_window_is_reset():
    q = SampledRate(RATE)
    q.record(0, 50e6)
    assert q.exceeded(10_999)  # 50 MB over 11 s
    assert not q.exceeded(11_000)  # SampledStat.purgeObsoleteSamples: 11 windows without an event


def test_one_fetcher_that_backs_off_copies_a_little_below_the_rate():
    # refused, it forgets its partition and waits replica.fetch.backoff.ms: the quota opens meanwhile and
    # nobody asks (benchmarks.quota's figure for one fetcher of one partition: 1.082 with 5 ms responses)
    size = 302_114_483
    out = run([Fetcher(1, ((0, size),))], RATE)
    assert out.done_ms[1] / (size / RATE * 1000) == pytest.approx(1.07, abs=0.02)


def test_fetchers_in_step_take_turns_in_rotation_and_end_one_turn_apart():
    # three sources, six partitions of 16 MiB each (the measured move), every response alike: each fetcher
    # takes a turn in rotation, so each source's copies end within a few turns of the others
    out = run([Fetcher(b, tuple((p, 16 * MiB) for p in range(6))) for b in (1, 2, 3)], RATE)
    assert out.turns == {1: 17, 2: 17, 3: 17}  # 16 responses of six 1 MiB chunks, then its followers' turn
    done = sorted(out.done_ms.values())
    bound = 18 * 16 * MiB / RATE * 1000
    assert done[-1] / bound == pytest.approx(1.046, abs=0.01)  # benchmarks.quota: 1.008, 1.035, 1.048
    assert done[-1] - done[0] < 4_000


def test_a_fetcher_whose_responses_come_back_sooner_takes_the_early_turns():
    # the same move with one source answering each fetch 20 ms sooner than the others: nothing random, its
    # copies end more than ten seconds before the others' (the measured waves: 69.6 s against 86 and 88 s)
    fetchers = [Fetcher(b, tuple((p, 16 * MiB) for p in range(6)), response_ms=ms) for b, ms in ((1, 10), (2, 30), (3, 30))]
    out = run(fetchers, RATE)
    assert out.done_ms[1] < min(out.done_ms[2], out.done_ms[3]) - 10_000


def test_a_follower_re_added_at_a_new_epoch_waits_until_its_fetchers_ask_finds_the_quota_open():
    # broker 1's one partition completes early; its follower stays (re-added, lag unknown) and its fetcher
    # asks when woken, then forgets it, then every replica.fetch.backoff.ms; broker 2's copy keeps the quota
    # exceeded most of the time
    fetchers = [Fetcher(1, ((0, 2 * MiB),)), Fetcher(2, tuple((p, 16 * MiB) for p in range(6)))]
    out = run(fetchers, RATE, apply_ms=50)
    applied, served = out.applied_ms[1], out.served_ms[1]
    asked = served - fetchers[0].response_ms
    assert asked > applied  # its first ask, when woken, was refused
    assert (asked - applied - FORGET_MS) % BACKOFF_MS == 0  # then it asked a backoff apart until one passed
    assert served < out.done_ms[2]  # a turn before broker 2's copies end: not "never while they copy"


def test_a_partition_the_receiving_broker_leads_afterwards_has_no_follower_there_to_wait_for():
    out = run([Fetcher(1, ((0, MiB),), leads_after=frozenset({0})), Fetcher(2, ((1, 16 * MiB),))], RATE)
    assert out.served_ms[1] is None and out.applied_ms[1] == out.done_ms[1] + 50


def test_deterministic():
    fetchers = [Fetcher(b, tuple((p, 8 * MiB) for p in range(3)), response_ms=10 + b) for b in (1, 2, 3)]
    assert run(fetchers, RATE, jitter_ms=30, seed=7) == run(fetchers, RATE, jitter_ms=30, seed=7)
    assert run(fetchers, RATE, jitter_ms=30, seed=7) != run(fetchers, RATE, jitter_ms=30, seed=8)
