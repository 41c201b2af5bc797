"""Kafka's replication quota, fetch by fetch: what the simulator's fluid quota approximates.

``python -m benchmarks.quota`` runs Kafka's quota rule one fetch response at a
time, as read from Kafka's source (``ReplicationQuotaManager``: a ``SimpleRate``
over ``SampledStat`` samples, ``replication.quota.window.num`` = 11 samples of
``replication.quota.window.size.seconds`` = 1; ``RemoteLeaderEndPoint.buildFetch``
leaves out a throttled partition not known to be in sync while the quota is
exceeded; ``AbstractFetcherThread`` waits ``replica.fetch.backoff.ms`` when it has
nothing it may fetch). It prints what docs/simulator.md cites: how much passes
at once (the early burst), the share of its rate a continuously refused fetcher
gets, how a fetcher that asks again sooner (it also fetches in-sync partitions
from that leader) takes the quota from one that backs off, and, for the
measured 24 x 16 MiB move under 4 MB/s, when each source broker's fetcher
finishes and how long its partitions then wait for a turn.
Times in this model are milliseconds, as Kafka's.
"""

from __future__ import annotations

import argparse
import heapq
import random

from engine.core.limits import DEFAULT_LIMITS

MiB = 1 << 20
SAMPLES, WINDOW_MS = 11, 1000
BACKOFF_MS = 1000  # replica.fetch.backoff.ms
NETWORK = 125e3  # bytes per ms (1 Gbit/s)


class Sample:
    def __init__(self, now: int):
        self.reset(now)

    def reset(self, now: int) -> None:
        self.start, self.last, self.value = now, now, 0.0


class Quota:
    """One broker's replication quota: samples kept in a ring of SAMPLES + 1, a sample completes after
    WINDOW_MS, a sample with no event for SAMPLES x WINDOW_MS is reset, and the rate is the samples' sum
    over the time since the oldest one started, at least one window (SimpleRate)."""

    def __init__(self, bytes_per_second: float):
        self.bound = bytes_per_second
        self.samples: list[Sample] = []
        self.current = 0

    def record(self, now: int, value: float) -> None:
        if not self.samples:
            self.samples.append(Sample(now))
        sample = self.samples[self.current]
        if now - sample.start >= WINDOW_MS:
            self.current = (self.current + 1) % (SAMPLES + 1)
            if self.current >= len(self.samples):
                sample = Sample(now)
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample.reset(now)
        sample.value += value
        sample.last = now

    def exceeded(self, now: int) -> bool:
        for s in self.samples:
            if now - s.last >= SAMPLES * WINDOW_MS:
                s.reset(now)
        if not self.samples:
            self.samples.append(Sample(now))
        oldest = min(s.start for s in self.samples)
        rate = sum(s.value for s in self.samples) / (max(now - oldest, WINDOW_MS) / 1000)
        return rate > self.bound


def burst(rate: float, recorded_ms: int) -> float:
    """Bytes that pass before the quota is first exceeded, after ``recorded_ms`` of empty fetches."""
    q, t = Quota(rate), 0
    while t < recorded_ms:
        q.record(t, 0)
        t += 500
    passed = 0.0
    while not q.exceeded(t):
        t += 10
        q.record(t, MiB)
        passed += MiB
    return passed


def move(rate: float, fetchers: int, partitions: int, size: int, seed: int) -> tuple[dict, dict]:
    """Every fetcher copies ``partitions`` partitions of ``size`` through one receiving broker's quota;
    a response carries up to 1 MiB per partition and 10 MiB in all. Returns when each fetcher's
    partitions were copied and how long they then waited for a turn (their fetcher, restarted at the
    new leader epoch, may not fetch them while the quota is exceeded)."""
    rnd = random.Random(seed)
    q = Quota(rate)
    left = {f: [size] * partitions for f in range(fetchers)}
    done: dict[int, int] = {}
    waited: dict[int, int] = {}
    events = [(rnd.randint(0, 20), f) for f in left]
    heapq.heapify(events)
    while events:
        t, f = heapq.heappop(events)
        copying = any(left[f])
        if not copying and f in waited:
            continue
        if q.exceeded(t):
            heapq.heappush(events, (t + BACKOFF_MS + rnd.randint(0, 5), f))
            continue
        if not copying:  # a turn: its partitions are fetched, known in sync again
            waited[f] = t - done[f]
            continue
        got = 0
        for i, x in enumerate(left[f]):
            take = min(x, MiB, 10 * MiB - got)
            left[f][i] -= take
            got += take
        t += 5 + int(got / NETWORK)
        q.record(t, got)
        if not any(left[f]):
            done[f] = t
        heapq.heappush(events, (t + rnd.randint(0, 5), f))
    return done, waited


def priority(rate: float, size: int, retry_ms: dict[int, int], seed: int) -> dict[int, int]:
    """Two fetchers, one copy each, through one quota; fetcher ``f`` asks again ``retry_ms[f]`` after a
    refusal (replica.fetch.backoff.ms when it has nothing else to fetch from that leader; less when its
    fetch of in-sync partitions returns with their new data first). Returns when each copy is done."""
    rnd = random.Random(seed)
    q = Quota(rate)
    left = {f: size for f in retry_ms}
    done: dict[int, int] = {}
    events = [(rnd.randint(0, 20), f) for f in left]
    heapq.heapify(events)
    while events:
        t, f = heapq.heappop(events)
        if not left[f]:
            continue
        if q.exceeded(t):
            heapq.heappush(events, (t + retry_ms[f] + rnd.randint(0, 5), f))
            continue
        take = min(left[f], MiB)
        left[f] -= take
        t += 5 + int(take / NETWORK)
        q.record(t, take)
        if not left[f]:
            done[f] = t
        heapq.heappush(events, (t + rnd.randint(0, 5), f))
    return done


MARGIN = DEFAULT_LIMITS.throttle_margin_pct  # Kafka's rate above the throttle, in percent
RATES = (1e6, 4e6, 10e6, 20e6, 50e6, 100e6)
SHAPES = ((1, 1), (2, 1), (1, 3), (3, 6))  # fetchers x partitions each


def by_rate(seconds: float = 75.0) -> None:
    """A move of ``seconds`` x rate bytes through one follower quota, for each rate and fetch shape:
    when its last fetcher finishes, as a multiple of bytes / rate (over three seeds), and what the
    copies average (bytes / that time, as a multiple of the throttle) when the same move runs through
    a quota of the throttle + ``MARGIN`` % (``throttle_margin_pct``'s default), fetch by fetch too."""
    print(f"a move of {seconds:g} s x rate through one follower quota; finished at (x bytes / rate) | "
          f"copies' average through a quota of rate + {MARGIN} % (x rate)")
    for rate in RATES:
        cells = []
        for fetchers, partitions in SHAPES:
            size = int(rate * seconds / (fetchers * partitions))
            total = fetchers * partitions * size
            xs = [max(move(rate, fetchers, partitions, size, seed)[0].values()) / (total / rate * 1000)
                  for seed in range(3)]
            ys = [total / (max(move(rate * (1 + MARGIN / 100), fetchers, partitions, size, seed)[0].values()) / 1000)
                  / rate for seed in range(3)]
            cells.append(f"{fetchers}x{partitions}: {min(xs):.3f}-{max(xs):.3f} | {min(ys):.3f}-{max(ys):.3f}")
        print(f"  {rate / 1e6:g} MB/s   " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--by-rate", action="store_true",
                        help="instead: what a used-up follower quota lets through, by rate and fetch shape "
                             "(what the throttle_margin_pct limit's default rests on)")
    args = parser.parse_args()
    if args.by_rate:
        by_rate()
        return
    rate = 4e6
    print(f"burst at {rate / 1e6:g} MB/s: a quota that just starts recording lets "
          f"{burst(rate, 0) / rate:.1f} s x rate through; one that recorded empty fetches for 20 s, "
          f"{burst(rate, 20_000) / rate:.1f} s x rate")
    for fetchers, partitions in ((1, 1), (1, 6), (2, 1), (3, 6)):
        done, _ = move(rate, fetchers, partitions, 16 * MiB * 18 // (fetchers * partitions), 0)
        bound = 18 * 16 * MiB / rate * 1000
        print(f"{fetchers} fetcher(s) x {partitions} partition(s), 302 MB in all: the last finishes at "
              f"{max(done.values()) / bound:.3f} x bytes / rate")
    for fast in (1000, 500, 250, 120, 20):
        done = priority(rate, 16 * MiB, {0: fast, 1: BACKOFF_MS}, 0)
        print(f"two copies of 16 MiB, one fetcher asking again {fast} ms after a refusal, the other "
              f"{BACKOFF_MS} ms: done at {done[0] / 1000:.1f} s and {done[1] / 1000:.1f} s")
    print("the measured move (3 source brokers x 6 partitions of 16 MiB, 4 MB/s), per seed:")
    for seed in range(args.seeds):
        done, waited = move(rate, 3, 6, 16 * MiB, seed)
        bound = 18 * 16 * MiB / rate * 1000
        print("  finished " + ", ".join(f"{done[f] / bound:.3f}" for f in sorted(done))
              + " x bytes / rate; then waited " + ", ".join(f"{waited[f] / 1000:.1f}" for f in sorted(done))
              + " s for a turn")


if __name__ == "__main__":
    main()
