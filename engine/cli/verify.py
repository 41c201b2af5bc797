"""``kreassign verify``: is each partition at its target, and are throttles cleared?

Like ``kafka-reassign-partitions.sh --verify``: the targets come from a
reassignment JSON file, or from a request recorded in the event log (its
completed partitions must be at their target, reverted ones at their original
replicas; cancelled ones are reported where they stopped). The cluster is read
now (``--cluster``, default the Kafka cluster at ``--bootstrap-server``), and so
are the throttle configs of the partitions' topics and of every broker (``Cluster.throttle_configs``: on
Kafka, one DescribeConfigs of the topics and one of each broker).
Unlike Kafka's tool it removes nothing: the engine owns the throttles it set. A broker's
``replica.alter.log.dirs.io.max.bytes.per.second``, which Kafka's tool's ``--verify`` also deletes and
kreassign never sets, is a throttle left, with the ``kafka-configs.sh`` command that removes it.
Exit status 0 when every partition is at its target and no throttle is left,
1 otherwise (for scripts), 2 on bad input.

With ``--request``, a throttle the engine wants in force now, by the log, for another request that is
running (a throttled replica of that request's step in flight; a broker's rate its partitions not ended
name) is *kept*: named, with that request, and not counted against this one. A throttle the engine is
failing to remove (its removal refused and retried) is not kept: it counts. Kafka's
tool cannot tell whose a throttle is; the event log can. With a reassignment JSON file every throttle
left counts, as in Kafka's tool.

A topic's throttled-replicas list that is the wildcard ``*`` (every replica) was set outside kreassign,
which never writes one: it is named with the ``kafka-configs.sh`` command that deletes it. With a
reassignment JSON file it counts (Kafka's tool's ``--verify`` deletes it); with ``--request`` it does not
(``_print_wildcards``).
"""

from __future__ import annotations

from engine.core import reassignment_json
from engine.cli import CliError, read_text
from engine.cli.connection import add_arguments, add_cluster_arguments, open_cluster_of
from engine.cli.status import Follower
from engine.core.decide import kept_for_others
from engine.core.outcomes import Unavailable
from engine.core.partition import Replicas, TopicPartition
from engine.core.state import (ABORTING, CANCELLED, COMPLETED, FINISHED_KEPT, IN_FLIGHT, PENDING, READY,
                               REVERTED, WAITING, State)
from engine.core.throttles import LOG_DIRS_RATE, ThrottleSet, read_back
from engine.views.progress import partition_word


TARGET = "target"
ORIGINAL = "original replicas"
ROLLED_BACK = " (rolled back)"
_MORE = {WAITING: "kreassign status says why", ABORTING: "its step being aborted"}
UNFINISHED = {status: partition_word(status) + (f": {_MORE[status]}" if status in _MORE else "")
              for status in (PENDING, READY, WAITING, IN_FLIGHT, ABORTING)}
"""A partition the engine has not finished yet, in the words of ``kreassign status`` (``PARTITION_WORDS``), with
what verify adds after a colon."""


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="check partitions reached their targets and throttles are cleared")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--reassignment-json-file", metavar="FILE", help="targets in Kafka's reassignment JSON")
    which.add_argument("--request", metavar="ID", help="a request from the event log")
    add_arguments(p)
    add_cluster_arguments(p, required=False)
    p.set_defaults(func=run)


def expectations(args) -> tuple[dict[TopicPartition, tuple[Replicas | None, str, str]], State | None]:
    """Partition -> (replicas it should have or None, what they are (or, with None, where the partition
    went), a note on where the engine stands with it or ""); the state folded from the log
    (``--request``), or None."""
    if args.reassignment_json_file:
        path = args.reassignment_json_file
        try:
            targets = reassignment_json.parse(read_text(path))
        except reassignment_json.ReassignmentJsonError as e:
            raise CliError(f"{path}: {e}") from None
        return {t.tp: (t.replicas, TARGET, "") for t in targets}, None
    follower = Follower(args)
    follower.poll()
    request = follower.state.requests.get(args.request)
    if request is None and follower.state.request(args.request) is not None:
        raise CliError(f"request '{args.request}' ended and was retired: the engine keeps the latest "
                       f"{FINISHED_KEPT} finished requests whole, and its partitions are in the event log "
                       f"only; verify its targets with --reassignment-json-file")
    if request is None:
        raise CliError(f"unknown request '{args.request}'")
    out = {}
    for tp in sorted(request.members.keys()):
        entry = follower.state.partitions.get(tp)
        if entry is None:
            out[tp] = (None, "taken over by a later request (since ended)", "")
        elif entry.request_id != args.request:
            out[tp] = (None, f"taken over by request {entry.request_id}", "")
        elif entry.status == REVERTED:
            out[tp] = (entry.original, ORIGINAL, ROLLED_BACK)
        elif entry.status == CANCELLED:
            out[tp] = (None, "cancelled", "")
        elif entry.status == COMPLETED:
            out[tp] = (entry.target, TARGET, "")
        else:
            word = UNFINISHED.get(entry.status, entry.status)
            if entry.rolling_back:
                out[tp] = (entry.original, ORIGINAL, f" yet (rolling back, {word})")
            else:
                out[tp] = (entry.target, TARGET, f" yet ({word})")
    return out, follower.state


def run(args) -> int:
    expected, state = expectations(args)
    cluster = open_cluster_of(args)
    try:
        # the topics' configs once, before the look: the Kafka adapter keeps the min.insync.replicas they carry,
        # so the look asks no DescribeConfigs of its own (one of the topics per run, not three). A failure is
        # said after the look's: a topic the principal may not Describe is named as such, not by its configs
        topics = sorted({tp.topic for tp in expected})
        of_topics = cluster.throttle_configs(topics, ())
        obs = cluster.observe(sorted(expected))
        if isinstance(obs, Unavailable):
            raise CliError(f"cannot read the cluster: {obs}")
        if obs.denied:  # never "does not exist": Kafka hides what a principal may not describe
            raise CliError("; ".join(obs.denied[t] for t in sorted(obs.denied)))
        if isinstance(of_topics, Unavailable):
            raise CliError(f"cannot read the throttle configs: {of_topics}")
        of_brokers = cluster.throttle_configs((), [b.id for b in obs.brokers])  # every broker the look names
        if isinstance(of_brokers, Unavailable):
            raise CliError(f"cannot read the throttle configs: {of_brokers}")
    finally:
        cluster.close()
    found = of_topics.throttles
    throttles = read_back(found.leader, found.follower, of_brokers.throttles.rates)
    wild = dict(of_topics.wildcards)
    ok = True
    print("Status of partition reassignment:")
    for tp, (want, what, note) in expected.items():
        p = obs.partitions.get(tp)
        if p is None:
            print(f"Partition {tp} does not exist on the cluster.")
            ok = False
        elif want is None:
            print(f"Partition {tp}: {what}; replicas now {_fmt(p.replicas)}.")
        elif p.reassignment_in_progress:
            print(f"Reassignment of partition {tp} is still in progress.")
            ok = False
        elif p.replicas == tuple(want) and note == ROLLED_BACK:
            print(f"Reassignment of partition {tp} was rolled back: it is at its original replicas {_fmt(p.replicas)}.")
        elif p.replicas == tuple(want):
            print(f"Reassignment of partition {tp} is completed.")
        else:
            print(f"Partition {tp} is not at its {what}{note}: replicas {_fmt(p.replicas)}, {what} {_fmt(want)}.")
            ok = False
    print()
    request = getattr(args, "request", None)
    left, kept = kept_for_others(state, request, throttles)
    ours = {e for e in left.leader | left.follower if e.topic in {tp.topic for tp in expected}}
    counted = bool(wild) and not request  # with --request: not this request's (kreassign never writes '*')
    log_dirs = dict(of_brokers.log_dirs)  # never kreassign's, never kept: counted as a rate left is
    if ours or left.leader_brokers or left.follower_brokers or counted or log_dirs:
        ok = False
        _print_throttles(left, "still set", "still have")
        _print_log_dirs(log_dirs, _kafka_configs(args, cluster))
    else:
        print("Throttles are cleared: no throttled replicas" + (" of kreassign's" if wild else "")
              + " on these topics and no throttle rate on any broker"
              + (" but those kept for other running requests (below)" if kept else "")
              + (" (the '*' lists set outside kreassign are below)." if wild else "."))
    _print_wildcards(wild, request, _kafka_configs(args, cluster))
    for rid, ts in kept.items():
        _print_throttles(ts, "kept", "keep", f" for request {rid} (running)")
    if kept:
        print("The engine removes each once no step in flight needs it and nothing left to do names its broker; "
              "they do not count here.")
    return 0 if ok else 1


def _print_throttles(ts: ThrottleSet, entries: str, rates: str, why: str = "") -> None:
    for topic, (leader, follower) in sorted(ts.by_topic().items()):
        print(f"Throttled replicas {entries} on topic {topic}{why}: leader {','.join(leader) or '-'}; "
              f"follower {','.join(follower) or '-'}")
    for name, brokers_set in (("leader", ts.leader_brokers), ("follower", ts.follower_brokers)):
        if brokers_set:
            print(f"Brokers {_fmt(sorted(brokers_set))} {rates} a {name}.replication.throttled.rate{why}")


def _print_log_dirs(log_dirs: dict[int, int], kafka_configs: str) -> None:
    """Brokers with a ``replica.alter.log.dirs.io.max.bytes.per.second`` (``LOG_DIRS_RATE``): Kafka's tool's
    ``--replica-alter-log-dirs-throttle`` sets it and its ``--verify`` deletes it on every broker with the
    replication rates. kreassign never sets it: one left counts as a rate left does, whoever set it, named with
    the command that removes it (one per broker: ``kafka-configs.sh`` alters one entity at a time)."""
    from engine.core.units import format_rate

    by_value: dict[int, list[int]] = {}
    for b, value in sorted(log_dirs.items()):
        by_value.setdefault(value, []).append(b)
    for value, brokers in sorted(by_value.items()):
        print(f"Brokers {_fmt(brokers)} still have a {LOG_DIRS_RATE} ({format_rate(value)}), set outside kreassign "
              f"(Kafka's tool's --replica-alter-log-dirs-throttle; kreassign never sets it).")
    for b in sorted(log_dirs):
        print(f"  To remove: {kafka_configs} --alter --entity-type brokers --entity-name {b} "
              f"--delete-config {LOG_DIRS_RATE}")


def _print_wildcards(wild: dict[str, frozenset[str]], request: str | None, kafka_configs: str) -> None:
    """A topic's throttled-replicas list that is the wildcard ``*`` (KIP-73: every replica of the topic, on
    every broker that has a rate). kreassign never writes one, so an operator or another tool set it. Kafka's
    tool's ``--verify`` deletes both lists of every topic of its file, a ``*`` too: with a reassignment JSON
    file it counts as a throttle left. With ``--request`` it is not that request's leftover; alone it throttles
    nothing (a rate on a broker does, and counts above): it is named, not counted."""
    for topic, sides in sorted(wild.items()):
        names = [f"{side}.replication.throttled.replicas" for side in ("leader", "follower") if side in sides]
        print(f"Throttled replicas {'set outside kreassign' if request else 'still set'} on topic {topic}: "
              f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} '*' (every replica of the topic), "
              + ("set by an operator or another tool (kreassign never writes '*')." if request else
                 "set outside kreassign (by an operator or another tool: kreassign never writes '*')."))
        print(f"  To remove: {kafka_configs} --alter --entity-type topics --entity-name {topic} "
              f"--delete-config {','.join(names)}")
    if not wild:
        return
    if request:
        print(f"Not counted against request {request}: kreassign did not leave it, and it throttles replication "
              "only on a broker with a replication.throttled.rate (a rate left counts here, whoever set it); while "
              "it stays, kreassign's rates throttle every replica of the topic on the brokers of its moves.")
    else:
        print("Kafka's tool's --verify deletes these configs once none of its file's partitions is reassigning; "
              "kreassign verify removes nothing, so they count as throttles left.")


def _kafka_configs(args, cluster) -> str:
    """``kafka-configs.sh`` with the options that reach the cluster verified (HOST:PORT where the cluster gives
    no Kafka address, e.g. a sim-cluster over HTTP or in process)."""
    bootstrap = getattr(cluster, "bootstrap", None) or "HOST:PORT"
    config = args.cluster_command_config if (args.cluster or "").startswith("kafka://") else args.command_config
    return f"kafka-configs.sh --bootstrap-server {bootstrap}" + (f" --command-config {config}" if config else "")


def _fmt(replicas) -> str:
    return "[" + ",".join(str(b) for b in replicas) + "]"
