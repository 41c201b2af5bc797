"""What makes a submission invalid. Every problem is named; none stops the search.

A submission is rejected as a whole, with one event listing every problem, and
nothing else changes.
"""

from __future__ import annotations

from collections import Counter

from engine.core.commands import Submit
from engine.core.step import STEP_MODES


def submission_problems(cmd: Submit, topics, brokers, observed, denied=None) -> list[str]:
    """Problems of ``cmd`` against the cluster as the state knows it.

    ``topics``: name -> TopicInfo; ``brokers``: id -> Broker (empty: not checked);
    ``observed``: tp -> PartitionState; ``denied``: topic -> why the engine may not describe it.
    """
    denied = denied or {}
    problems: list[str] = []
    if not cmd.request_id:
        problems.append("request id is empty")
    if not cmd.partitions:
        problems.append("the reassignment lists no partitions")
    if cmd.throttle_rate is not None and cmd.throttle_rate < 1:
        problems.append(f"throttle must be at least 1 byte/s, got {cmd.throttle_rate}")
    if cmd.steps not in STEP_MODES:
        problems.append(f"unknown steps '{cmd.steps}': one of {', '.join(STEP_MODES)}")
    listed = Counter(p.tp for p in cmd.partitions)
    for tp, n in listed.items():
        if n > 1:
            problems.append(f"partition {tp} is listed {n} times")
    unknown_topics: set[str] = set()
    for p in cmd.partitions:
        tp = p.tp
        info = topics.get(p.topic)
        if p.topic in denied:
            if p.topic not in unknown_topics:
                unknown_topics.add(p.topic)
                problems.append(f"topic '{p.topic}': the engine may not describe it: {denied[p.topic]}")
        elif info is None:
            if p.topic not in unknown_topics:
                unknown_topics.add(p.topic)
                problems.append(f"unknown topic '{p.topic}'")
        elif not 0 <= p.partition < info.partitions:
            problems.append(f"unknown partition {tp}: topic '{p.topic}' has {info.partitions} partitions")
        elif tp not in observed:
            problems.append(f"no current replicas known for partition {tp}")
        elif p.replicas and len(set(p.replicas)) < info.min_insync_replicas and not cmd.allow_below_min_insync:
            problems.append(
                f"{tp}: {len(set(p.replicas))} replicas is below the topic's min.insync.replicas "
                f"({info.min_insync_replicas}): acks=all producers would fail with NOT_ENOUGH_REPLICAS "
                f"after the move (submit with --allow-below-min-insync to do it anyway)"
            )
        if not p.replicas:
            problems.append(f"{tp}: empty replica list")
        negative = [b for b in p.replicas if b < 0]
        if negative:
            problems.append(f"{tp}: negative broker ids {negative}")
        twice = sorted(b for b, n in Counter(p.replicas).items() if n > 1)
        if twice:
            problems.append(f"{tp}: brokers {twice} listed more than once")
        if brokers:
            absent = sorted({b for b in p.replicas if b >= 0 and b not in brokers})
            if absent:
                problems.append(f"{tp}: brokers {absent} are not in the cluster")
        if p.log_dirs is not None:
            if len(p.log_dirs) != len(p.replicas):
                problems.append(
                    f"{tp}: {len(p.log_dirs)} log_dirs for {len(p.replicas)} replicas (they must match)"
                )
            elif any(d != "any" for d in p.log_dirs):
                problems.append(f"{tp}: log_dirs other than \"any\" (moves between log directories) are not supported")
    return problems
