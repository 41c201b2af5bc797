"""Reassignment limits (KIP-435 batching plus per-broker caps).

Each limit has its name, default, KIP alias and the reason for its default side
by side in ``SETTINGS``. The defaults are meant for a busy production cluster:
slow and steady, never a burst. Operators raise them deliberately.

KIP-435 names its limits inconsistently (``reassignment.max.concurrent.*`` in
its config table, ``reassignment.parallel.*`` in its algorithm). Both spellings
are accepted as aliases, mapped by what the name says they limit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping, NamedTuple


class Setting(NamedTuple):
    name: str
    symbol: str
    default: int
    aliases: tuple[str, ...]
    why: str
    least: int = 1  # the lowest value it takes
    most: int | None = None  # the highest (None: no bound)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "max_replicas_per_step", "R", 1,
        ("reassignment.parallel.replica.count",),
        "KIP-435's point: bring one new replica in sync at a time, so the extra "
        "replication load of a partition is one follower's catch-up, not RF of them.",
    ),
    Setting(
        "max_partitions_in_flight", "P", 200,
        ("reassignment.parallel.partition.count", "reassignment.max.concurrent.partition.movements"),
        "Bounds controller work (each step is a reassignment, LeaderAndIsr and "
        "metadata updates) and the size of the throttled-replica lists. A drop Kafka completes at its "
        "alter (the whole target in sync) is never a reassignment in progress and takes no slot; at most "
        "5,000 of them go in one alter (Kafka's controller takes 10,000 records an operation).",
    ),
    Setting(
        "max_leader_moves_in_flight", "L", 20,
        ("reassignment.parallel.leader.movements", "reassignment.max.concurrent.leader.movements"),
        "Every leader move makes producers and consumers of that partition refresh "
        "metadata and retry; twenty at a time keeps client disruption small. A drop Kafka completes at "
        "its alter moves its leader at that instant and takes no slot: such moves happen in one alter, "
        "and a client refreshes its metadata once for all of them (one request covers all its topics), "
        "where moves twenty at a time would make it refresh, and its acks=all writes stall, each time.",
    ),
    Setting(
        "max_replica_additions_in_flight", "A", 200,
        ("reassignment.max.concurrent.replica.movements",),
        "Cluster-wide cap on replicas being copied at once (equals P x R by default); "
        "the bound on total replication traffic that throttles do not cover (ISR traffic).",
    ),
    Setting(
        "max_incoming_moves_per_broker", "in", 2,
        ("num.concurrent.partition.movements.per.broker.in",),
        "A broker receiving more copies at once only splits its throttle finer, so each "
        "copy and each under-replicated window lasts longer; two keep the pipe full.",
    ),
    Setting(
        "max_outgoing_moves_per_broker", "out", 2,
        ("num.concurrent.partition.movements.per.broker.out",),
        "The leader serves every new follower from its disk and NIC while it serves "
        "producers and consumers; two concurrent copies out of one broker are a safe load.",
    ),
    Setting(
        "full_move_seconds", "S", 2,
        ("reassignment.full.move.seconds",),
        "The per-broker move caps count moves by what they load a broker with: a copy that takes at least "
        "this long at the throttle rate is a whole move, a shorter one its share of one in eighths, rounded "
        "up (two slots hold two big copies, or sixteen of an eighth), so small partitions keep the throttle "
        "busy instead of holding a slot each. A copy under half an eighth of this (a 1 MiB copy at 50 MB/s: "
        "1/95) weighs nothing: its load on a broker is its log's creation, which the new-replica caps "
        "(max_new_replicas_per_broker, creation_window_ms) bound.",
    ),
    Setting(
        "max_new_replicas_per_broker", "new", 2,
        ("reassignment.max.new.replicas.per.broker",),
        "A broker applies metadata changes one at a time and creates each new replica's log on that one "
        "thread (Kafka's metadata loader, ReplicaManager.applyDelta); a finished move's leader epoch "
        "change waits behind the logs queued before it, and meanwhile its leader refuses the new "
        "follower's fetches, so acks=all writes wait. Until the engine has seen how fast a broker makes new "
        "replicas it asks it for two at once, whatever their size; afterwards for what creation_window_ms "
        "allows, and never fewer than this.",
    ),
    Setting(
        "creation_window_ms", "W", 1500,
        ("reassignment.creation.window.ms",),
        "Once the engine has seen how fast a broker completes new replicas (seconds per replica while steps "
        "adding one to it are in flight, from the alter's answer to the look that sees it complete: log "
        "created, copy made, ISR joined, the look's own delay included), each decision asks it for as many "
        "as it completes in this many ms, and at most twice that are in flight: one batch is created while "
        "the next is decided, so the broker does not idle through the engine's cycle. Small copies are bound "
        "by log creation (one at a time per broker; one alter's new replicas start fetching together, once "
        "all their logs exist, as with Kafka's tool); a finished move's epoch change waits behind at most "
        "about one batch of it.",
    ),
    Setting(
        "throttle_release_ms", "U", 1000,
        ("throttle.release.ms",),
        "A copy that misses no more than what the throttle gives it in this many ms is released from "
        "the throttle, so its replica never joins the ISR while still listed as throttled (measured on "
        "Kafka 4.0: that stalls acks=all producers for seconds). It covers the time to notice and to "
        "change the config: the engine's cycle from a measure to its next (a tick's reads and appends, "
        "the request budget's waits) took up to 0.95 s against the simulated cluster's Kafka front, and at "
        "500 ms 10 of 30 simulated moves had a copy join still throttled, 1 at 1000; per receiving broker "
        "at most this many ms of the rate copy unthrottled at once.",
    ),
    Setting(
        "release_at_start", "Q", 1,
        ("throttle.release.at.start",),
        "1: a copy the release rule (throttle_release_ms) would free as soon as it is measured, its whole "
        "log no more than its share of the throttle gives it in U ms, with room in its receiving brokers' "
        "release bucket, starts released: no throttled-replica entry is set for it and removed a moment "
        "later. Each is a config change (IncrementalAlterConfigs, a metadata record every broker applies) "
        "and a request the budget counts; on 300 x 1 MiB at 50 MB/s that was two per step and held the "
        "engine's cycle. Its bytes are charged to the bucket as a release's, so what a broker receives "
        "unthrottled is bound as before. 0: every copy starts throttled (the engine the 2026-11-26 records "
        "ran).",
        least=0, most=1,
    ),
    Setting(
        "max_drop_hold_seconds", "H", 300,
        ("reassignment.drop.hold.seconds",),
        "--steps grouped holds a partition's final drop so that its leader's drops go together, one leader "
        "epoch bump for them (each holds the leader's acks=all writes up about a second), while new "
        "replicas of the request still copy from that leader. The held partition keeps its old replica "
        "(its disk, its fetches, its leadership if it led) meanwhile; this bounds it: a leader's held drops "
        "go together at the latest this many seconds after the first of them was held, so a long move frees "
        "disk as it goes and its producers feel one stall per leader at most every H s (0.4 % of the "
        "leader's writes at 300 s). Moves shorter than H are not split. 0: a drop is never held.",
        least=0,
    ),
    Setting(
        "pin_dominant_source", "D", 1,
        ("source.pin.dominant",),
        "1: while one source broker has at least twice the ready steps of any other (a retired broker "
        "leading a third of the moves), its copies go into one live broker at a time, a broker no other "
        "source copies into for the same requests meanwhile (another request keeps its turn): beside another leader's copy its own can get nearly nothing of "
        "the receiver's follower quota (Kafka gives a used-up quota to the fetcher that also fetches "
        "in-sync partitions; a broker follows no partition of a leader of its own rack), and it would "
        "end last, alone. Copies that weigh nothing are exempt. 0: no such rule (the engine the "
        "2026-11-26 records ran).",
        least=0, most=1,
    ),
    Setting(
        "keep_throttle_rates", "K", 1,
        ("throttle.rates.kept",),
        "1: a broker keeps its throttle rate between steps while a partition still to do names it (as "
        "Kafka's tool keeps its rates for the whole move), instead of deleting it with its last step in "
        "flight and setting it again with the next: on a 12-broker move of 2,279 partitions that was two "
        "thirds of the engine's config changes. A rate throttles only the replicas the topics list; set 0 "
        "where topics hold throttled-replica lists of other tools (or '*') that must run unthrottled "
        "between kreassign's steps.",
        least=0, most=1,
    ),
    Setting(
        "throttle_margin_pct", "M", 8,
        ("throttle.margin.pct",),
        "Kafka's replication quota lets through less than its rate: a fetcher it refuses waits "
        "replica.fetch.backoff.ms (1 s) before it asks again, and the quota opens meanwhile with nobody "
        "asking (AbstractFetcherThread). kreassign's steps, one or two copies into a broker at a time, took "
        "1.089 x bytes / rate on Kafka 4.0 where Kafka's tool's 18 moves at once took about 1.0 x (a response "
        "of several partitions overshoots the quota by more), and 1.075 to 1.099 x by Kafka's rule fetch by "
        "fetch from 4 to 50 MB/s. Kafka's rate is set this many percent above the throttle, so kreassign's "
        "steps copy at about the throttle (0.98 to 1.005 x), as Kafka's tool's moves do; lower it where raised "
        "per-broker caps make fetchers carry several copies; 0 sets the throttle itself, as Kafka's tool does.",
        least=0, most=25,
    ),
)

_SETTING: dict[str, Setting] = {s.name: s for s in SETTINGS}
_BY_NAME: dict[str, str] = {}
for _s in SETTINGS:
    for _n in (_s.name, _s.name.replace("_", "-"), _s.name.replace("_", "."), *_s.aliases):
        _BY_NAME[_n] = _s.name
# Cruise Control's single per-broker cap sets both directions, and the new replicas a broker may be
# asked to create at once: each move into a broker is one, and an operator who asks for N moves per
# broker expects N to run (the new-replica cap would hold them at its default otherwise).
_BOTH = "num.concurrent.partition.movements.per.broker"
_BOTH_SETS = ["max_incoming_moves_per_broker", "max_outgoing_moves_per_broker", "max_new_replicas_per_broker"]


class LimitsError(ValueError):
    """A limits change that names an unknown setting or a value out of its range."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_replicas_per_step: int = 1
    max_partitions_in_flight: int = 200
    max_leader_moves_in_flight: int = 20
    max_replica_additions_in_flight: int = 200
    max_incoming_moves_per_broker: int = 2
    max_outgoing_moves_per_broker: int = 2
    full_move_seconds: int = 2
    max_new_replicas_per_broker: int = 2
    throttle_release_ms: int = 1000
    creation_window_ms: int = 1500
    keep_throttle_rates: int = 1
    throttle_margin_pct: int = 8
    release_at_start: int = 1
    pin_dominant_source: int = 1
    max_drop_hold_seconds: int = 300

    def changed(self, changes: Mapping[str, int]) -> "Limits":
        """A copy with ``changes`` applied; keys may be field names or KIP aliases.

        Raises ``LimitsError`` naming every bad key and value at once.
        """
        resolved, problems = resolve_changes(changes)
        if problems:
            raise LimitsError("; ".join(problems))
        return replace(self, **resolved)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def setting(name: str) -> Setting | None:
    """The setting a name stands for (ours, with underscores, dashes or dots, or a KIP alias), or None."""
    found = _BY_NAME.get(name.strip())
    return None if found is None else _SETTING[found]


def settings_named(name: str) -> list[Setting]:
    """The settings a name sets: one (``setting``), the three per-broker caps for
    ``num.concurrent.partition.movements.per.broker`` (as ``resolve_changes`` does), or none."""
    if name.strip() == _BOTH:
        return [_SETTING[n] for n in _BOTH_SETS]
    found = setting(name)
    return [] if found is None else [found]


def resolve_changes(changes: Mapping[str, int]) -> tuple[dict[str, int], list[str]]:
    """Map alias keys to field names and check values; returns (resolved, problems)."""
    resolved: dict[str, int] = {}
    problems: list[str] = []
    for key, value in changes.items():
        names = list(_BOTH_SETS) if key == _BOTH else [_BY_NAME.get(key)]
        if names == [None]:
            problems.append(f"unknown limit '{key}'")
            continue
        setting = _SETTING[names[0]]
        if (isinstance(value, bool) or not isinstance(value, int) or value < setting.least
                or (setting.most is not None and value > setting.most)):
            span = f">= {setting.least}" if setting.most is None else f"from {setting.least} to {setting.most}"
            problems.append(f"limit '{key}' must be an integer {span}, got {value!r}")
            continue
        for name in names:
            resolved[name] = value
    if not changes:
        problems.append("no limits given")
    return resolved, problems


DEFAULT_LIMITS = Limits()
assert all(getattr(DEFAULT_LIMITS, s.name) == s.default for s in SETTINGS)
