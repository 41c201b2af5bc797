"""``kreassign balance``: show cluster state, propose balanced targets (KAFKA-5319).

The cluster comes from a live cluster (``--bootstrap-server``, or ``--cluster``
as it is now: ``kafka://HOST:PORT``, ``sim+http://HOST:PORT``) or a scenario
file (``--scenario``). Proposals print like ``kafka-reassign-partitions.sh
--generate``: the current assignment of every partition that changes (keep it
for rollback), then the proposed reassignment, both in Kafka's JSON; a summary
follows. ``--output-file`` writes the proposal alone; ``--execute`` submits it
to the engine as a request.
"""

from __future__ import annotations

import argparse
import io
import json

from engine.core import reassignment_json
from engine.core.balancer import BalanceError, Proposal, cluster_state, propose
from engine.cli import CliError, read_text
from engine.cli import verdicts
from engine.cli.connection import (
    KEEP, NONE_MEANS, RATE_OR_NONE, add_arguments, add_cluster_arguments, fail_fast, rate_or_none, submit_throttle,
)
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.views.verdict import count
from engine.core.commands import PartitionTarget, Submit
from engine.log.envelope import new_id
from engine.core.units import format_size


def add_parser(sub) -> None:
    p = sub.add_parser("balance", help="show cluster balance or propose replica/leader-balanced targets")
    p.add_argument("--scenario", metavar="FILE",
                   help="balance the cluster of a scenario file (its starting point) instead of the live one")
    add_arguments(p, required=False, signing=True)
    add_cluster_arguments(p, required=False)
    verdicts.add_arguments(p)
    p.add_argument("--execute", action="store_true",
                   help="submit the proposal to the engine as a request (published to --bootstrap-server)")
    p.add_argument("--throttle", type=rate_or_none, default=KEEP, metavar=RATE_OR_NONE,
                   help=f"with --execute: replication throttle for this and later moves, bytes/s per broker and "
                        f"direction; {NONE_MEANS}; as kreassign throttle --rate (default: keep the current rate)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--show-cluster-state", action="store_true", help="replicas, leaders and bytes per broker and rack")
    mode.add_argument("--leader-balance", action="store_true", help="spread preferred leaders (reorders replicas only)")
    mode.add_argument("--replica-balance", action="store_true", help="even out replica counts per broker")
    mode.add_argument("--cluster-balance", action="store_true", help="replica balance, then leader balance")
    mode.add_argument("--add-brokers", metavar="IDS", type=_ids, help="fill these (new) brokers to balance")
    mode.add_argument("--remove-brokers", metavar="IDS", type=_ids, help="drain these brokers completely")
    mode.add_argument("--topics-to-move-json-file", metavar="FILE",
                      help="Kafka's --generate: move these topics onto --broker-list")
    p.add_argument("--broker-list", metavar="IDS", type=_ids, help="brokers for --topics-to-move-json-file")
    p.add_argument("--threshold-percentage", type=float, default=10.0, metavar="PCT",
                   help="replica counts within this %% of the average count as balanced (default 10)")
    p.add_argument("--disable-rack-aware", action="store_true", help="ignore racks, as Kafka's tool does")
    p.add_argument("--output-file", metavar="FILE", help="also write the proposed reassignment JSON here")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): the proposal in words (--show-cluster-state: the table); json: one object with the current and proposed assignments, the summary and the verdict (--show-cluster-state: the state)")
    p.set_defaults(func=run)


def _ids(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got {text!r}") from None
    if not ids or any(b < 0 for b in ids):
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got {text!r}")
    return ids


def load_snapshot(args) -> ClusterSnapshot:
    """The scenario's cluster if one is given, else the live cluster (--cluster, --bootstrap-server)."""
    from engine.cluster.connect import ConnectError, snapshot_of

    try:
        if args.scenario:
            return snapshot_of(scenario_file=args.scenario)
        if args.cluster == "kafka" or args.cluster.startswith("kafka://"):
            fail_fast(args)  # a refused connection said at once, not after --timeout
        return snapshot_of(bootstrap=args.bootstrap_server, command_config=args.command_config, timeout=args.timeout,
                           cluster=args.cluster, cluster_command_config=args.cluster_command_config)
    except ConnectError as e:
        where = args.scenario or (args.bootstrap_server if args.cluster == "kafka" else args.cluster)
        raise CliError(f"{where}: {e}") from None


def _topics_to_move(path: str) -> list[str]:
    try:
        doc = json.loads(read_text(path))
        topics = [t["topic"] for t in doc["topics"]]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CliError(f'{path}: expected {{"topics":[{{"topic":"name"}},...],"version":1}} ({e})') from None
    if not topics or not all(isinstance(t, str) and t for t in topics):
        raise CliError(f"{path}: no topics listed")
    return topics


def run(args) -> int:
    if not args.scenario and not args.bootstrap_server and args.cluster == "kafka":
        raise CliError("give the cluster: --bootstrap-server B, --cluster sim+http://HOST:PORT or --scenario FILE")
    if args.scenario and args.cluster != "kafka":
        raise CliError("--scenario and --cluster name two different clusters: give one")
    if args.execute and not args.bootstrap_server:
        raise CliError("--execute publishes to the engine's event log: give --bootstrap-server")
    if args.execute and args.show_cluster_state:
        raise CliError("--execute goes with a proposal, not --show-cluster-state")
    if args.broker_list and not args.topics_to_move_json_file:
        raise CliError("--broker-list goes with --topics-to-move-json-file")
    if args.topics_to_move_json_file and not args.broker_list:
        raise CliError("--topics-to-move-json-file needs --broker-list")
    if not 0 <= args.threshold_percentage <= 100:
        raise CliError(f"--threshold-percentage must be between 0 and 100, got {args.threshold_percentage}")
    snap = load_snapshot(args)
    sizes = {tp: p.size_bytes for tp, p in snap.partitions.items() if p.size_bytes is not None}
    if args.show_cluster_state:
        leaders = {tp: p.leader for tp, p in snap.partitions.items()}
        state = cluster_state(snap.assignment(), snap.racks(), leaders, sizes or None, [b.id for b in snap.brokers])
        racks = snap.racks()
        print(json.dumps(_state_document(state, racks)) if args.format == "json" else render_state(state, racks))
        return 0
    mode, extra = _mode(args)
    try:
        proposal = propose(
            mode, snap.assignment(), snap.racks(), [b.id for b in snap.brokers], sizes,
            threshold=args.threshold_percentage / 100, rack_aware=not args.disable_rack_aware,
            down=[b.id for b in snap.brokers if not b.alive], **extra,
        )
    except BalanceError as e:
        raise CliError(str(e)) from None
    if args.output_file:
        try:
            with open(args.output_file, "w", encoding="utf-8") as f:
                f.write(reassignment_json.dumps(proposal.proposed) + "\n")
        except OSError as e:
            raise CliError(f"{args.output_file}: {e.strerror}") from None
    request_id = command = envelope = verdict = None
    if args.execute and proposal.proposed:
        targets = tuple(PartitionTarget(tp.topic, tp.partition, r) for tp, r in sorted(proposal.proposed.items()))
        command = Submit(new_id(), targets, **submit_throttle(args.throttle))
        request_id = command.request_id
        envelope, verdict = verdicts.publish_and_wait(args, command)
    if args.format == "json":
        print(json.dumps({
            "request_id": request_id,
            "verdict": verdict.to_json() if verdict is not None else None,
            "current": reassignment_json.document(proposal.current),
            "proposed": reassignment_json.document(proposal.proposed),
            "summary": _summary_document(proposal),
        }))
        return verdicts.exit_status(args, verdict) if command is not None else 0
    print(render_proposal(proposal, args.threshold_percentage))
    if command is None:
        if args.execute:
            print("Nothing to submit: the proposal is empty")
        return 0
    print(f"Submitted as request {request_id}; the engine's verdict:" if not args.no_wait
          else "Submitted as request:")
    return verdicts.show(args, "balance", command, envelope.id, verdict)


def _mode(args) -> tuple[str, dict]:
    if args.leader_balance:
        return "leader-balance", {}
    if args.replica_balance:
        return "replica-balance", {}
    if args.cluster_balance:
        return "cluster-balance", {}
    if args.add_brokers:
        return "add-brokers", {"add": args.add_brokers}
    if args.remove_brokers:
        return "remove-brokers", {"remove": args.remove_brokers}
    return "generate", {"topics": _topics_to_move(args.topics_to_move_json_file), "broker_list": args.broker_list}


def render_proposal(p: Proposal, threshold_pct: float) -> str:
    lines = [
        "Current partition replica assignment",
        reassignment_json.dumps(p.current),
        "",
        "Proposed partition reassignment configuration",
        reassignment_json.dumps(p.proposed),
        "",
    ]
    moved = f"{count(p.replicas_moved, 'replica')} moved (lower bound {p.lower_bound})"
    if p.bytes_moved is not None:
        moved += f", {format_size(p.bytes_moved)} to copy"
    lines.append(f"{count(len(p.proposed), 'partition')} {'changes' if len(p.proposed) == 1 else 'change'}: {moved}; "
                 f"{count(p.leaders_moved, 'preferred leader')} {'changes' if p.leaders_moved == 1 else 'change'}")
    if p.target is not None:
        lo, hi = p.target
        verdict = ("NOT reached: " + "; ".join(p.notes) if not p.balanced
                   else "every broker within it" if not p.pinned
                   else f"every broker within it but the pinned {list(p.pinned)}: " + "; ".join(p.notes))
        lines.append(f"Replicas per broker target {lo}..{hi} (threshold {threshold_pct:g} %): {verdict}")
    return "\n".join(lines)


def _summary_document(p: Proposal) -> dict:
    return {
        "partitions": len(p.proposed), "replicas_moved": p.replicas_moved, "lower_bound": p.lower_bound,
        "bytes_moved": p.bytes_moved, "leaders_moved": p.leaders_moved,
        "target": list(p.target) if p.target else None, "balanced": p.balanced, "pinned": list(p.pinned), "notes": list(p.notes),
    }


def render_state(state, racks=None) -> str:
    """The cluster's state as two tables (brokers, with their rack; racks) and the imbalance line.
    ``racks``: broker id -> rack (None: none)."""
    from rich.console import Console
    from rich.table import Table

    racks = racks or {}
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None, record=True)
    for title, rows, first in (("Brokers", state.brokers, ("broker", "rack")), ("Racks", state.racks, ("rack",))):
        table = Table(title=title)
        for col in (*first, "replicas", "dev %", "leaders", "dev %", "preferred leaders", "dev %", "bytes", "dev %"):
            table.add_column(col, justify="left" if col == "rack" else "right")
        dev = {f: state.deviation(rows, f) for f in ("replicas", "leaders", "preferred_leaders", "bytes")}
        for r in rows:
            head = (r.name, _rack(racks, r.name)) if title == "Brokers" else (r.name,)
            table.add_row(
                *head, str(r.replicas), _pct(dev["replicas"].get(r.name)), str(r.leaders),
                _pct(dev["leaders"].get(r.name)), str(r.preferred_leaders), _pct(dev["preferred_leaders"].get(r.name)),
                format_size(r.bytes) if r.bytes is not None else "-", _pct(dev["bytes"].get(r.name)),
            )
        console.print(table)
    figures = ", ".join(f"{k.replace('_', ' ')} {v:.1f} %" for k, v in state.imbalance.items())
    console.print(f"Imbalance (largest deviation from the broker average): {figures}")
    return console.export_text().rstrip()


def _rack(racks, name: str) -> str:
    rack = racks.get(int(name)) if name.isdigit() else None
    return rack if rack is not None else "(none)"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}"


def _state_document(state, racks=None) -> dict:
    racks = racks or {}
    return {
        "brokers": [{**r._asdict(), "rack": racks.get(int(r.name)) if r.name.isdigit() else None}
                    for r in state.brokers],
        "racks": [r._asdict() for r in state.racks],
        "imbalance_percent": state.imbalance,
    }
