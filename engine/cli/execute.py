"""``kreassign execute``: publish a reassignment (a submit command) and print the engine's verdict.

What can be checked without the cluster is checked here (the file's shape,
duplicate partitions, empty or repeated replica lists, negative ids,
log_dirs); a problem gives one line naming the file, exit status 2, and
nothing is published. What needs the cluster (topics, partitions, brokers)
is checked by the engine, which rejects the whole request with every reason
(``CommandRejected`` on the events topic): the command waits for that verdict
and prints it, accepted with the request id (exit 0) or rejected with every
reason (exit 1); ``engine.cli.verdicts`` has the details and ``--no-wait``.
"""

from __future__ import annotations

from engine.core import reassignment_json
from engine.cli import CliError, read_text
from engine.cli import verdicts
from engine.cli.connection import KEEP, NONE_MEANS, RATE_OR_NONE, add_arguments, rate_or_none, submit_throttle
from engine.core.commands import PartitionTarget, Submit
from engine.core.step import DEFAULT_STEP_MODE, STEP_MODES
from engine.log.envelope import new_id
from engine.core.partition import TopicInfo
from engine.core.validation import submission_problems


def add_parser(sub) -> None:
    p = sub.add_parser("execute", help="publish a reassignment (Kafka reassignment JSON); prints the engine's verdict and the request id")
    p.add_argument("--reassignment-json-file", required=True, metavar="FILE", help="proposed assignment (Kafka JSON)")
    p.add_argument("--throttle", type=rate_or_none, default=KEEP, metavar=RATE_OR_NONE,
                   help=f"replication throttle for this and later moves, bytes/s per broker and direction; "
                        f"{NONE_MEANS}; the same as kreassign throttle --rate (default: keep the current rate)")
    p.add_argument("--request-id", metavar="ID", help="request id to use (default: a new UUID)")
    p.add_argument("--steps", choices=STEP_MODES, default=DEFAULT_STEP_MODE,
                   help="how the partitions step (docs/algorithm.md, section 1): incremental (default: KIP-435's "
                        "R replicas a step, a new preferred leader joining in the step that drops the old one: "
                        "one leader epoch bump), kip-435 (KIP-435 exactly: a new preferred leader added alone "
                        "and elected after its step, two bumps), whole (one step to the target, as Kafka's "
                        "tool: one completion and one bump per partition) or grouped (as incremental, but "
                        "each partition's last bump is timed by the engine: the replicas a leader's partitions "
                        "replace leave together, in one alter (Kafka completes it: it takes no P or L), once no new replica of the "
                        "request copies from that leader: one stall for them where incremental gives one per "
                        "partition; the old replicas are kept until then, at most max_drop_hold_seconds: 300 s by default). Each bump holds the acks=all writes "
                        "of the partitions its leader leads up about a second (docs/engine.md)")
    p.add_argument("--allow-below-min-insync", action="store_true",
                   help="accept targets with fewer replicas than the topic's min.insync.replicas "
                        "(acks=all producers would then fail with NOT_ENOUGH_REPLICAS)")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=run)


def local_problems(targets: tuple[PartitionTarget, ...], request_id: str | None) -> list[str]:
    """The core's validation, with the cluster assumed to hold every named partition:
    only the problems of the document itself remain."""
    problems = [f"{t.tp}: partition number must be >= 0" for t in targets if t.partition < 0]
    targets = tuple(t for t in targets if t.partition >= 0)
    topics: dict[str, TopicInfo] = {}
    for t in targets:
        topics[t.topic] = TopicInfo(max(topics.get(t.topic, TopicInfo(0)).partitions, t.partition + 1))
    everywhere = {t.tp: None for t in targets}
    return problems + submission_problems(Submit(request_id or "local-check", targets), topics, {}, everywhere)


def run(args) -> int:
    path = args.reassignment_json_file
    try:
        targets = reassignment_json.parse(read_text(path))
    except reassignment_json.ReassignmentJsonError as e:
        raise CliError(f"{path}: {e}") from None
    if args.request_id is not None and not args.request_id.strip():
        raise CliError("--request-id must not be empty")
    problems = local_problems(targets, args.request_id)
    if problems:
        raise CliError(f"{path}: " + "; ".join(problems))
    command = Submit(args.request_id or new_id(), targets, **submit_throttle(args.throttle),
                     allow_below_min_insync=args.allow_below_min_insync, steps=args.steps)
    if args.request_id is not None and not args.no_wait:
        from engine.core.decide import _digest  # the core's digest of a submit's targets

        known = verdicts.already_accepted(args, args.request_id, _digest(command))
        if known is not None:
            print(f"request {args.request_id}: already accepted with exactly these targets "
                  f"({known.partitions} partitions, {known.status}); the engine takes this as a re-delivery "
                  "and decides nothing new")
            return verdicts.ACCEPTED
    return verdicts.send(args, command, "execute")
