"""Event logs with realistic times for the analytics tests: the core run by ``Driver`` on the
fake cluster, each round of the engine's loop a fixed number of seconds after the last."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from engine.core import events as ev
from engine.log.envelope import EventEnvelope, new_id
from engine.core.partition import PartitionState, TopicPartition
from tests.fake_cluster import Driver, FakeCluster

START = datetime(2026, 3, 1, 23, 58, 10, tzinfo=timezone.utc)  # crosses midnight: two dates


class TimedDriver(Driver):
    """A ``Driver`` with a clock: every event is stamped with the time of the round that made it."""

    def __init__(self, cluster: FakeCluster, start: datetime = START, seconds_per_round: float = 7.0):
        self.at = start
        self.round = timedelta(seconds=seconds_per_round)
        self.stamps: list[datetime] = []
        super().__init__(cluster)

    def feed(self, inp) -> list:
        before = len(self.events)
        out = super().feed(inp)
        self.stamps.extend([self.at] * (len(self.events) - before))
        return out

    def tick(self) -> list:
        self.at += self.round
        self.now = self.at.timestamp()  # the core's clock follows the stamps
        return super().tick()

    def record(self, event, at: datetime) -> None:
        """An event the fake cluster cannot produce (e.g. an ISR shrink), at a given time."""
        self.events.append(event)
        self.stamps.append(at)

    def envelopes(self, since: int = 0) -> list[EventEnvelope]:
        return [EventEnvelope(new_id(), t, e) for t, e in zip(self.stamps[since:], self.events[since:])]


def sized_cluster(assignment: dict[TopicPartition, tuple[int, ...]], brokers, sizes) -> FakeCluster:
    """A fake cluster whose partitions report ``sizes[tp]`` bytes."""
    cluster = FakeCluster(assignment, brokers)
    for tp, size in sizes.items():
        cluster.parts[tp] = cluster.parts[tp]._replace(size_bytes=size)
    return cluster


def one_at_a_time(busy):
    """Finish only the first move in progress each round: steps take different times."""
    return busy[:1]


def isr_shrink(driver: TimedDriver, tp: TopicPartition, replicas: tuple[int, ...], lagging: int,
               at: datetime, seconds: float) -> None:
    """``tp`` observed with ``lagging`` out of the ISR at ``at``, back in sync ``seconds`` later."""
    short = PartitionState(replicas, frozenset(replicas) - {lagging}, replicas[0], 1000)
    whole = PartitionState(replicas, frozenset(replicas), replicas[0], 1000)
    driver.record(ev.PartitionObserved(tp, short), at)
    driver.record(ev.PartitionObserved(tp, whole), at + timedelta(seconds=seconds))
