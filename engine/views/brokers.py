"""What waits on a broker that does not answer, or is down: a pure function of the state.

A broker that stops answering is named by the engine's broker watch (``engine.cluster.watch``) with
the cluster calls that wait on it; a broker that is down is in the state (``Broker.alive``). What the
operator needs next is what that costs the reassignment (issue 27: the two steps in flight targeted
``(4,1,2,3)``, could not finish while broker 3 was out of the ISR, and the incoming cap of 2 then held
the 8 queued ones; nothing said so):

* the steps in flight that need it: it is in their TR (Kafka completes a step only when all of TR is
  in the ISR) or their copies come out of it; they cannot finish until it answers (or is back);
* the partitions queued behind a limit those steps hold: for each limit that refuses a queued step
  (``engine.core.scheduler.refusal``: P, L, the cluster-wide additions, a broker's incoming or
  outgoing cap), how much of it such steps take.

``stuck_brokers`` gives one ``engine.views.attention`` entry per such broker (kind ``broker``,
severity error): every broker that does not answer, and every broker that is down while a step in
flight needs it. Moves that need neither go on, and the entry says so.
"""

from __future__ import annotations

from typing import Mapping

from engine.core.decide import creations
from engine.core.scheduler import A, DRAINED, PIN_IN, PIN_OUT, PINNED, WEIGHT_UNITS, at_alter, pin_holds, refusal
from engine.core.state import State
from engine.views.attention import _entry, _n, _named


def stuck_brokers(state: State, unresponsive: Mapping[int, Mapping] | None = None,
                  members: set | None = None) -> list[dict]:
    """Attention entries for the brokers that do not answer (``unresponsive``: broker -> {"seconds",
    "waiting"}, from the engine's broker watch) or are down while a step in flight needs them;
    ``members``: one request's partitions only."""
    unresponsive = dict(unresponsive or {})
    down = {b for b, broker in state.brokers.items() if not broker.alive}
    needs: dict[int, list] = {}
    for tp, f in state.steps.items():
        for b in set(f.step.tr) | ({f.step.source} if f.step.nr and f.step.source is not None else set()):
            if b in unresponsive or b in down:
                needs.setdefault(b, []).append(tp)
    out = []
    for b in sorted(set(unresponsive) | set(needs)):
        tps = sorted(needs.get(b, ()))
        if members is not None:
            tps = [tp for tp in tps if tp in members]
            if not tps and b not in unresponsive:
                continue
        lines = []
        if b in unresponsive:
            info = unresponsive[b]
            title = f"broker {b} does not answer (for {float(info.get('seconds', 0)):.0f} s)"
            waiting = list(info.get("waiting") or ())
            if waiting:
                lines.append("waiting on it: " + "; ".join(waiting))
            calls = list(info.get("calls_waiting") or ())
            if calls:
                lines.append("cluster calls the engine stopped waiting for meanwhile (they finish in the background): "
                             + ", ".join(f"{c['call']} ({c['seconds']:.0f} s)" for c in calls))
        else:
            title = f"broker {b} is down"
        if tps:
            steps = ", ".join(f"{tp} {list(state.steps[tp].step.tr)}" for tp in tps[:12])
            more = f" and {len(tps) - 12} more" if len(tps) > 12 else ""
            lines.append(f"{_n(len(tps), 'step')} in flight need{'s' if len(tps) == 1 else ''} it (in TR, or the "
                         f"source of its copies) and cannot finish until it {'answers' if b in unresponsive else 'is back'}"
                         f" and is in the ISR again: {steps}{more}")
            lines.extend(_held(state, set(tps), b))
        lines.append("moves that do not need it go on")
        if tps:
            title += f": {_n(len(tps), 'step')} in flight cannot finish"
        out.append(_entry("broker", "error", title, lines, count=max(1, len(tps)), partitions=tps,
                          reason=title))
    return out


def _held(state: State, stuck: set, broker: int) -> list[str]:
    """One line per limit that holds queued partitions back while steps that need ``broker`` take
    part of it."""
    c, lim = state.in_flight, state.limits
    groups: dict[object, list] = {}
    for lanes in state.ready.sources.values():
        for chain in lanes.values():
            for _seq, tp, key in chain:
                why = refusal(c, lim, key, creations(state))
                if why is not None:
                    groups.setdefault(why, []).append(tp)
    lines = []
    for why, tps in sorted(groups.items(), key=lambda x: (-len(x[1]), str(x[0]))):
        takers = [tp for tp, f in state.steps.items() if _takes(f, why)]
        theirs = [tp for tp in takers if tp in stuck]
        if not theirs:
            continue
        lines.append(f"{_n(len(tps), 'partition')} queued behind {_limit(state, why)}, "
                     f"{len(theirs)} of {len(takers)} taken by the steps that need broker {broker}: {_named(tps)}")
    return lines


def _takes(f, why) -> bool:
    """Whether the step in flight ``f`` takes part of the limit ``why`` (``engine.core.scheduler.refusal``;
    a drop Kafka completes at its alter takes none: ``at_alter``)."""
    step = f.step
    if at_alter(step.nr, f.weight):
        return False
    if why == "P":
        return True
    if why == "L":
        return f.moves_leader
    if why == A:
        return bool(step.nr)
    side, b = why
    return b in step.nr if side == "in" else bool(step.nr) and step.source == b


def _limit(state: State, why) -> str:
    lim, c = state.limits, state.in_flight
    if why == "P":
        return f"max_partitions_in_flight ({c.partitions} of {lim.max_partitions_in_flight} in flight)"
    if why == "L":
        return f"max_leader_moves_in_flight ({c.leader_moves} of {lim.max_leader_moves_in_flight})"
    if why == A:
        return f"max_replica_additions_in_flight ({c.additions} of {lim.max_replica_additions_in_flight})"
    side, b = why
    if side == "in":
        used = c.incoming.get(b, 0) / WEIGHT_UNITS
        return (f"the incoming cap of broker {b} (max_incoming_moves_per_broker {lim.max_incoming_moves_per_broker}:"
                f" {used:g} taken; new replicas {c.new_replicas.get(b, 0)} of {creations(state)(b)[0]})")
    used = c.outgoing.get(b, 0) / WEIGHT_UNITS
    return f"the outgoing cap of broker {b} (max_outgoing_moves_per_broker {lim.max_outgoing_moves_per_broker}: {used:g} taken)"


PIN_WORDS = {
    PINNED: "of other leaders wait{s} to copy into broker {to} until broker {d} is done with it",
    PIN_OUT: "of broker {d} wait{s} to copy into other brokers until its copies into broker {to} have started",
    PIN_IN: "of broker {d} wait{s} for another leader's copies into their broker to end",
    DRAINED: "of other leaders wait{s} to copy into broker {drained}, kept free for broker {d}",
}


def pinned_source(state: State, members: set | None = None) -> list[dict]:
    """The attention entry (kind ``pinned``, warning) for the ready partitions the dominant-source rule
    holds (``engine.core.scheduler.pin_holds``: among those a decision looks at; docs/algorithm.md,
    section 2, "A dominant source"): the broker the dominant leader copies into alone (or that is kept
    free for it), why, and one line per reason with the partitions held; none when it holds nothing.
    ``members``: one request's partitions only."""
    holds = pin_holds(state.ready, state.in_flight, state.limits, creations(state), state.live_brokers())
    by_why: dict[str, list] = {}
    for tp, (_key, why) in holds.held.items():
        if members is None or tp in members:
            by_why.setdefault(why, []).append(tp)
    if not by_why:
        return []
    d = holds.source
    to = ", ".join(map(str, sorted(holds.pinned_to)))
    drained = ", ".join(map(str, sorted(holds.drained)))
    if holds.pinned_to:
        where = f"broker {to}"
    elif holds.drained:
        where = f"broker {drained}, once another leader's copies into it end"
    else:
        where = "one no other leader copies into"
    n = sum(map(len, by_why.values()))
    title = f"broker {d}'s copies go into one broker at a time: {where} ({_n(n, 'partition')} wait)"
    lines = [f"broker {d} leads at least twice the ready moves of any other broker; a broker that leads no "
             f"partition the receiving broker follows gets almost none of its throttle beside another "
             f"leader's copies (Kafka's replica fetchers), so broker {d} is given its receiving broker alone"]
    for why in (PINNED, PIN_OUT, PIN_IN, DRAINED):
        tps = by_why.get(why)
        if tps:
            words = PIN_WORDS[why].format(s="s" if len(tps) == 1 else "", to=to, d=d, drained=drained)
            lines.append(f"{_n(len(tps), 'partition')} {words}: {_named(tps)}")
    lines.append("the limit pin_dominant_source (source.pin.dominant) 0 turns this off")
    tps = [tp for group in by_why.values() for tp in group]
    return [_entry("pinned", "warning", title, lines, count=len(tps), partitions=tps,
                   reason=f"broker {d}'s copies go into one broker at a time")]
