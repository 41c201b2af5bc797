"""The balancer (KAFKA-5319): targets worth moving to, in Kafka's reassignment JSON.

Modes (``propose``): replica balance, leader balance, cluster balance (replicas
then leaders), adding brokers, removing brokers, and Kafka's ``--generate``
(some topics onto a broker list). Every mode is rack-aware unless told not to,
moves as little as possible, and reports its moves against a lower bound. For
the same replica and leader balance, and never for more bytes, it keeps
preferred leaders where it can (each change is a leadership change on the
cluster): ``keep_preferred_leaders`` in ``replicas.py``, the anchored and free
partitions of ``leaders.py``. Pure functions: same input, same proposal.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from engine.core.balancer.leaders import balance_leaders, change_bound, leader_imbalance
from engine.core.balancer.replicas import (
    BalanceError, ReplicaBalance, balance_replicas, keep_preferred_leaders, rack_spread_kept, target_range,
)
from engine.core.balancer.report import ClusterState, Row, cluster_state
from engine.core.partition import Replicas, TopicPartition

__all__ = [
    "MODES", "BalanceError", "ClusterState", "Proposal", "Row", "balance_leaders", "balance_replicas",
    "change_bound", "cluster_state", "keep_preferred_leaders", "leader_imbalance", "propose", "rack_spread_kept",
    "target_range",
]

MODES = ("replica-balance", "leader-balance", "cluster-balance", "add-brokers", "remove-brokers", "generate")


class Proposal(NamedTuple):
    current: dict[TopicPartition, Replicas]  # partitions that change, as they are (for rollback)
    proposed: dict[TopicPartition, Replicas]  # the same partitions, as proposed
    replicas_moved: int
    bytes_moved: int | None  # None when some moved partition's size is unknown
    leaders_moved: int  # partitions whose preferred leader changes
    lower_bound: int  # replicas that must move at least (0 for leader balance)
    target: tuple[int, int] | None  # replica-count range per broker, when replicas were balanced
    balanced: bool  # every broker within ``target``, except the ``pinned`` ones
    notes: tuple[str, ...]
    pinned: tuple[int, ...] = ()  # left outside the range: the placement rules give them no move


def propose(
    mode: str,
    assignment: Mapping[TopicPartition, Replicas],
    racks: Mapping[int, str | None],
    brokers: Iterable[int],
    sizes: Mapping[TopicPartition, int] | None = None,
    threshold: float = 0.10,
    rack_aware: bool = True,
    add: Iterable[int] = (),
    remove: Iterable[int] = (),
    topics: Iterable[str] | None = None,
    broker_list: Iterable[int] | None = None,
    down: Iterable[int] = (),
) -> Proposal:
    """A proposal for ``mode`` (one of ``MODES``); see the module docstring.

    ``down``: brokers that are offline. No replica is ever proposed onto one; a
    mode that would place replicas on them is refused (bring them back, or
    remove them with ``remove-brokers``).
    """
    if mode not in MODES:
        raise BalanceError(f"unknown mode {mode!r}")
    known = set(brokers)
    scope = dict(assignment)
    if mode == "generate":
        wanted = set(topics or ())
        scope = {tp: r for tp, r in assignment.items() if tp.topic in wanted}
        missing = sorted(wanted - {tp.topic for tp in scope})
        if missing:
            raise BalanceError(f"unknown topics {missing}")
        eligible = set(broker_list or ())
        if not eligible:
            raise BalanceError("--generate needs a broker list")
        unknown = sorted(eligible - known)
        if unknown:  # Kafka's tool refuses them too: a target on a broker that does not exist never completes
            raise BalanceError(f"brokers {unknown} of the broker list are not in the cluster")
    elif mode == "add-brokers":
        eligible = known | set(add)
    elif mode == "remove-brokers":
        unknown = sorted(set(remove) - known)
        if unknown:
            raise BalanceError(f"brokers {unknown} are not in the cluster")
        eligible = known - set(remove)
    else:
        eligible = known | {b for r in assignment.values() for b in r}
    blocked = sorted(set(down) & eligible)
    if blocked and mode != "leader-balance":
        ids = ",".join(map(str, blocked))
        raise BalanceError(f"brokers [{ids}] are down: bring them back, or drain them (remove-brokers {ids})")
    after = dict(scope)
    bound, target, balanced, notes, pinned = 0, None, True, (), ()
    placed = kept = after
    if mode != "leader-balance":
        rb: ReplicaBalance = balance_replicas(scope, racks, eligible, sizes, threshold, rack_aware)
        placed, bound, target, balanced, notes, pinned = (
            rb.assignment, rb.lower_bound, rb.target, rb.balanced, rb.notes, rb.pinned)
        after = kept = keep_preferred_leaders(scope, placed, racks, eligible, sizes, rack_aware)
    if mode != "replica-balance":
        after = balance_leaders(kept, eligible, down=set(down), original=scope)
        if kept is not placed and leader_imbalance(after, eligible, set(down)):
            # the exchanges changed which brokers share partitions: keep them only if leader balance
            # reaches as far from them as without them
            plain = balance_leaders(placed, eligible, down=set(down), original=scope)
            if leader_imbalance(plain, eligible, set(down)) < leader_imbalance(after, eligible, set(down)):
                after = plain
    changed = sorted(tp for tp in scope if after[tp] != tuple(scope[tp]))
    moved = {tp: len(set(after[tp]) - set(scope[tp])) for tp in changed}
    sizes = sizes or {}
    copied = {tp: n for tp, n in moved.items() if n}  # reorder-only partitions copy nothing
    bytes_moved = sum(sizes[tp] * n for tp, n in copied.items()) if all(tp in sizes for tp in copied) else None
    return Proposal(
        current={tp: tuple(scope[tp]) for tp in changed},
        proposed={tp: after[tp] for tp in changed},
        replicas_moved=sum(moved.values()),
        bytes_moved=bytes_moved,
        leaders_moved=sum(1 for tp in changed if after[tp][0] != scope[tp][0]),
        lower_bound=bound,
        target=target,
        balanced=balanced,
        notes=notes,
        pinned=pinned,
    )
