"""``kreassign list``: requests in the event log, and reassignments in progress on the cluster.

The second part is what ``kafka-reassign-partitions.sh --list`` prints (from
ListPartitionReassignments), in its words; it also shows moves that other
tools started.
"""

from __future__ import annotations

from datetime import datetime, timezone

from engine.cli import CliError
from engine.cli.connection import add_arguments, add_cluster_arguments, open_cluster_of
from engine.cli.status import Follower
from engine.views.progress import report, request_line, skip_lines
from engine.core.outcomes import Unavailable


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list requests and the reassignments in progress on the cluster")
    add_arguments(p)
    add_cluster_arguments(p, required=False)
    p.set_defaults(func=run)


def run(args) -> int:
    follower = Follower(args)
    follower.poll()
    doc = report(follower.state, follower.progress, datetime.now(timezone.utc))
    print("Requests:" if doc["requests"] else "Requests: none")
    for r in doc["requests"]:
        print(request_line(r["id"], r["outcome"], r["partitions"], r))
        for line in skip_lines(r["cancel_skipped"]):
            print(f"  {line}")
    cluster = open_cluster_of(args)
    try:
        obs = cluster.observe(None)
    finally:
        cluster.close()
    if isinstance(obs, Unavailable):
        raise CliError(f"cannot read the cluster: {obs}")
    moving = sorted((tp, p) for tp, p in obs.partitions.items() if p.reassignment_in_progress)
    print("Current partition reassignments:" if moving else "No partition reassignments found.")
    for tp, p in moving:
        print(f"{tp}: replicas: {','.join(map(str, p.replicas))}. adding: {','.join(map(str, p.adding))}. "
              f"removing: {','.join(map(str, p.removing))}.")
    return 0
