"""``kreassign plan``: print each partition's KIP-435 steps, touching no cluster.

CURRENT is Kafka's own JSON, as ``kafka-reassign-partitions.sh --generate``
prints it under "Current partition replica assignment"; TARGET is the proposed
reassignment. Every partition is assumed healthy (all replicas in sync, the
first one leading), which is what a plan made ahead of time can assume.
"""

from __future__ import annotations

import json

from engine.core import reassignment_json
from engine.cli import CliError, read_text
from engine.cli.connection import int_at_least
from engine.core.commands import PartitionTarget, Submit
from engine.core.partition import TopicInfo, TopicPartition, in_sync
from engine.core.step import DEFAULT_STEP_MODE, STEP_MODES, plan_all
from engine.core.validation import submission_problems


_positive_int = int_at_least(1, "an integer")


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="print the incremental steps of a reassignment (no cluster needed)")
    p.add_argument("--reassignment-json-file", required=True, metavar="TARGET", help="proposed assignment (Kafka JSON)")
    p.add_argument("--current-json-file", required=True, metavar="CURRENT", help="current assignment (Kafka JSON)")
    p.add_argument("--max-replicas-per-step", type=_positive_int, default=1, metavar="R",
                   help="replicas added/removed per step (KIP-435 R, default 1)")
    p.add_argument("--min-insync-replicas", type=_positive_int, default=1, metavar="N",
                   help="min.insync.replicas of the topics (default 1)")
    p.add_argument("--steps", choices=STEP_MODES, default=DEFAULT_STEP_MODE,
                   help="how the partitions step, as execute --steps (default: incremental)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): each partition's steps, in words; json: one object, each partition's steps as target replica lists")
    p.set_defaults(func=run)


def _load(path: str) -> tuple[PartitionTarget, ...]:
    try:
        return reassignment_json.parse(read_text(path))
    except reassignment_json.ReassignmentJsonError as e:
        raise CliError(f"{path}: {e}") from None


def plan_partitions(targets, current, min_insync: int, r: int, steps: str = DEFAULT_STEP_MODE):
    """[(tp, current replicas, steps)] in the order of the target file."""
    observed = {c.tp: in_sync(c.replicas) for c in current}
    return [
        (t.tp, observed[t.tp].replicas, plan_all(observed[t.tp].replicas, t.replicas, min_insync, r, steps=steps))
        for t in targets
    ]


def run(args) -> int:
    targets = _load(args.reassignment_json_file)
    current = _load(args.current_json_file)
    seen: dict[TopicPartition, int] = {}
    for c in current:
        if c.tp in seen:
            raise CliError(f"{args.current_json_file}: partition {c.tp} is listed more than once")
        if not c.replicas:
            raise CliError(f"{args.current_json_file}: {c.tp}: empty replica list")
        seen[c.tp] = 1
    topics: dict[str, TopicInfo] = {}
    for tp in seen:
        n = topics.get(tp.topic, TopicInfo(0)).partitions
        topics[tp.topic] = TopicInfo(max(n, tp.partition + 1), args.min_insync_replicas)
    observed = {c.tp: in_sync(c.replicas) for c in current}
    problems = submission_problems(Submit("plan", targets), topics, {}, observed)
    if problems:
        raise CliError(f"{args.reassignment_json_file}: " + "; ".join(problems))
    planned = plan_partitions(targets, current, args.min_insync_replicas, args.max_replicas_per_step, args.steps)
    if args.format == "json":
        print(json.dumps({
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "steps": [list(s.tr) for s in steps]}
                for tp, _cr, steps in planned
            ],
        }))
        return 0
    total_steps = added = 0
    for tp, cr, steps in planned:
        if not steps:
            print(f"{tp}: already at target {_fmt(cr)}")
            continue
        print(f"{tp}: {_fmt(cr)} -> {_fmt(steps[-1].tr)} in {len(steps)} step{'s' * (len(steps) != 1)}")
        for i, s in enumerate(steps, 1):
            change = " ".join(x for x in (
                f"+{_fmt(s.nr)}" if s.nr else "", f"-{_fmt(s.dr)}" if s.dr else "",
                f"leader {s.leader} -> {s.tr[0]}" if s.moves_leader else "",
                "reorder" if not (s.nr or s.dr or s.moves_leader) else "",
            ) if x)
            print(f"  {i}. {_fmt(s.tr):<24} {change}")
        total_steps += len(steps)
        added += sum(len(s.nr) for s in steps)
    print(f"{len(planned)} partitions, {total_steps} steps, {added} replicas to copy "
          f"(R={args.max_replicas_per_step}, min.insync.replicas={args.min_insync_replicas}, steps {args.steps})")
    return 0


def _fmt(replicas) -> str:
    return "[" + ",".join(str(b) for b in replicas) + "]"
