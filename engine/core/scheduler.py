"""KIP-435 batch scheduler: which ready steps start next, under the limits.

Limits (``engine.core.limits``): P partitions with a step in flight, L steps in
flight that move a leader, A replica additions in flight cluster-wide,
per-broker caps on incoming copies (a broker in NR) and outgoing copies (the
leader that feeds NR), weighted by their seconds at the throttle (a copy far
shorter than a move weighs nothing: ``weight_units``), and a count
of the new replicas each broker is asked to create at once, whatever their
size (a broker creates logs one at a time): two until the broker's rate of
making them is known, then what it makes in ``creation_window_ms`` per
decision and twice that in flight (``creation_caps``). A step that only drops
replicas from a partition whose whole target is in sync weighs nothing
(``at_alter``): Kafka completes it at its alter, so it is never a reassignment
in flight there and takes no limit, P and L included; such drops start first,
all at once (a ``grouped`` release: one alter, one stall per leader, where
the limits would split it into several). No limit is ever exceeded: the planner never plans a
step that could not fit on its own (|NR| <= the outgoing cap and A, the
min.insync catch-up included), and a step planned before a limit was lowered
is planned again when it is reached.

Order. Leader-moving steps first (up to L), then the others (KIP-435). Within
each class, partitions that already started their reassignment ("continuing")
go before fresh ones, so the cluster finishes what it began. Then requests
take turns: each request has a rank, the steps it has started plus where it
joined (a request accepted while others run starts level with the least
served of them), and the lowest rank goes first, so a small urgent request is
interleaved with a decommission already running instead of waiting behind it
(start-time fair queueing). Within a request, first come first served.

No starvation. When the highest-priority step that could start is refused by
a per-broker cap or by A (it needs two copies out of a broker that has one
free, say), the capacity it lacks is reserved for it for the rest of the
decision: younger steps may not take what is left of it, so it starts as soon
as enough is free, however many smaller steps keep arriving. A reservation
never holds capacity the step has room on (its source's, when only its target
is full): that capacity it could not use before what it lacks frees, which may
be never (a step into its target stuck on a dead replica), and meanwhile a
healthy source would idle. The one exception is the dominant source's drain
(below): it holds brokers the held copies have room on, but only live ones,
only while the source is live and has no copy it may start elsewhere, and only
for what the other sources' copies into them have left. A decision holds one
reservation: the drain or a limit's, whichever its oldest blocked step needs.

A dominant source (``pin_dominant_source``; docs/algorithm.md, section 2). A
live source with at least DOMINANCE times the ready steps of any other copies
into one broker at a time: at a receiver whose follower quota is used up,
Kafka's fetchers that also fetch in-sync partitions take the quota, and a
fetcher with only throttled copies (a retired leader's, into a broker of its
rack) gets almost nothing. So, for copies that weigh something: the source is
pinned to the live brokers it copies into and has ready copies for (``pins``);
another source's copy of one of the source's requests into them waits
(PINNED: another request keeps its turn); the source's own copies into other
brokers wait (PIN_OUT); its copy into a broker another live source copies into
waits (PIN_IN), and if it has no copy it may start elsewhere, the oldest such
copy's brokers drain for it (the reservation above). A dead broker is never
pinned (a copy into it stays in flight until it returns, and the source's other
copies would wait as long), and a dead source is not dominant.

Fresh looks. ``replan`` answers ``None`` for a partition not looked at just
before this decision: it stays ready and takes nothing, so a step is charged
to its partition's leader as last observed, never to one its queued plan
remembers (``engine.core.decide.starting`` names the partitions to look at).

Cost. Ready steps sit in lanes by the broker they copy out of (one lane per
request, leader-moving class and readiness class, first come first served). A
decision skips every source whose outgoing cap is full, looks at each other
lane's head, walks into a lane while it admits steps, and past a blocked step
looks at most SCAN more of that lane: O(lanes + (k + SCAN x lanes) log lanes)
for k steps started, never a scan of the queue, whatever it holds. Requests take
turns through a heap of their lanes' heads, so a pop costs O(log), never a look
at every request. The drops that take no limit are indexed apart by the order
they became ready (``ReadyIndex.free``): O(f log f) for the f of them, at most
``FREE_PER_DECISION`` started. A decision with P already full returns after them. The
dominant-source rule adds O(lanes) (``dominant``) and O(SCAN x the source's
lanes) (``pins``); ``pin_holds``, which the views call, looks at what a
decision looks at: O(SCAN x lanes).

Everything here is an immutable value; the ready index lives in the state and
is changed only by ``engine.core.state.apply``.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Iterator, NamedTuple

import immutables

from engine.core.limits import Limits
from engine.core.partition import Replicas, TopicPartition
from engine.core.step import Step


WEIGHT_UNITS = 8
"""A move's weight against the per-broker move caps, in eighths of a move: a copy that takes at least
``full_move_seconds`` at the throttle rate is a whole move (8); a shorter one its share, rounded up;
one shorter than half an eighth weighs nothing (0: ``weight_units``). A step that copies nothing weighs
a whole move in P and L, or nothing at all where Kafka completes it at its alter (``at_alter``)."""


FREE_PER_DECISION = 5000
"""The most drops that take no limit (``at_alter``) one decision starts: they go in one
AlterPartitionReassignments, and Kafka's controller makes one record per partition in a list it caps
at 10,000 per operation (``MAX_RECORDS_PER_USER_OP``; past it, each partition is refused on its own); half
of that leaves room for the decision's other steps (P of them, 200 by default)."""


def at_alter(nr: Replicas, weight: int) -> bool:
    """A step that copies nothing and weighs nothing: a drop of replicas from a partition whose whole
    target the look before it showed in sync, which Kafka completes inside its alter
    (``PartitionReassignmentReplicas.maybeCompleteReassignment``: the ISR less the removed replicas
    holds every target replica). Never a reassignment in flight on the cluster, it counts in no limit."""
    return not nr and not weight


def weight_units(size: int | None, rate: int | None, full_seconds: float) -> int:
    """A copy's weight against the per-broker caps: its seconds at ``rate`` over ``full_seconds``, in
    WEIGHT_UNITS, rounded up, to a whole move at most; a whole move when the size or the rate is unknown.
    A copy shorter than half an eighth of a move (under 0.125 s at the throttle by default: 6.25 MB at
    50 MB/s) weighs nothing: what it costs a broker is its log's creation (about 0.1 s each, one at a
    time, on the measured Kafka 4.0), which the new-replica caps bound (``creation_caps``: they follow
    the broker's measured time per new replica, its copy included, so they bound its bytes too). Charged
    an eighth, sixteen of them filled a broker's two slots while their logs were being created, and
    the next batch could not be asked for before they were done (issue 26)."""
    if size is None or rate is None:
        return WEIGHT_UNITS
    full = int(rate * full_seconds)
    if 2 * size * WEIGHT_UNITS < full:
        return 0
    return max(1, min(WEIGHT_UNITS, -(-size * WEIGHT_UNITS // full)))


class SchedulingKey(NamedTuple):
    """What a ready step needs: the partitions in one bucket are interchangeable."""

    moves_leader: bool
    source: int | None
    nr: Replicas  # sorted
    weight: int = WEIGHT_UNITS  # of each copy against the per-broker caps, in eighths of a move (0: nothing)

    @classmethod
    def of(cls, step: Step, weight: int = WEIGHT_UNITS) -> "SchedulingKey":
        return cls(step.moves_leader, step.source, tuple(sorted(step.nr)), weight)


CONTINUING, FRESH = 0, 1  # readiness classes, in priority order


class Chain(NamedTuple):
    """A persistent FIFO with removal anywhere in O(log n): position -> (entry, previous, next)."""

    nodes: immutables.Map = immutables.Map()
    head: int = -1
    tail: int = -1
    counter: int = 0  # the next position handed out

    def push(self, entry) -> tuple["Chain", int]:
        pos = self.counter
        nodes = self.nodes.set(pos, (entry, self.tail, -1))
        if self.tail >= 0:
            e, prev, _nxt = nodes[self.tail]
            nodes = nodes.set(self.tail, (e, prev, pos))
        return Chain(nodes, pos if self.head < 0 else self.head, pos, pos + 1), pos

    def delete(self, pos: int) -> "Chain":
        _e, prev, nxt = self.nodes[pos]
        nodes = self.nodes.delete(pos)
        if prev >= 0:
            e, pp, _ = nodes[prev]
            nodes = nodes.set(prev, (e, pp, nxt))
        if nxt >= 0:
            e, _, nn = nodes[nxt]
            nodes = nodes.set(nxt, (e, prev, nn))
        return Chain(nodes, nxt if pos == self.head else self.head, prev if pos == self.tail else self.tail,
                     self.counter)

    def entry(self, pos: int):
        return self.nodes[pos][0]

    def after(self, pos: int) -> int:
        return self.nodes[pos][2]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        pos = self.head
        while pos >= 0:
            entry, _prev, pos = self.nodes[pos]
            yield entry


class Ranks(NamedTuple):
    """A persistent multiset of non-negative ints (the ranks of the requests running) with its least
    member: a bitmap trie, 5 bits a level (``(mask, children)`` nodes, a child per set bit), so
    adding, removing and the least member each cost O(log) whatever it holds."""

    root: tuple | None = None
    size: int = 0

    LEVELS = 8  # keys below 2 ** 40

    def add(self, key: int, delta: int = 1) -> "Ranks":
        """``delta`` more of ``key`` (negative: fewer; a count never goes below zero)."""
        if not 0 <= key < 1 << (5 * self.LEVELS):
            raise ValueError(f"rank {key} out of range")
        return Ranks(_trie_add(self.root, key, delta, 5 * (self.LEVELS - 1)), self.size + delta)

    def least(self, default: int = 0) -> int:
        """The least member, or ``default`` when empty."""
        node, shift, key = self.root, 5 * (self.LEVELS - 1), 0
        if node is None:
            return default
        while True:
            mask, kids = node
            i = (mask & -mask).bit_length() - 1
            key |= i << shift
            if shift == 0:
                return key
            node, shift = kids[0], shift - 5


def _trie_add(node: tuple | None, key: int, delta: int, shift: int) -> tuple | None:
    mask, kids = node if node is not None else (0, ())
    i = (key >> shift) & 31
    bit = 1 << i
    pos = (mask & (bit - 1)).bit_count()
    if mask & bit:
        child = kids[pos]
        new = child + delta if shift == 0 else _trie_add(child, key, delta, shift - 5)
        if shift == 0 and new < 0:
            raise ValueError(f"rank {key} removed more often than added")
        if not new:
            mask ^= bit
            kids = kids[:pos] + kids[pos + 1:]
        else:
            kids = kids[:pos] + (new,) + kids[pos + 1:]
    else:
        if delta < 0:
            raise ValueError(f"rank {key} removed but absent")
        if not delta:
            return node
        new = delta if shift == 0 else _trie_add(None, key, delta, shift - 5)
        mask |= bit
        kids = kids[:pos] + (new,) + kids[pos:]
    return (mask, kids) if mask else None


class Slot(NamedTuple):
    """Where a ready partition sits in the index (kept on the partition)."""

    source: int | None
    lane: tuple  # (request id, leader-moving class, readiness class)
    pos: int


class ReadyIndex(NamedTuple):
    """Ready steps by the broker they copy out of (``None``: they copy nothing), then by lane: one
    lane per request, leader-moving class and readiness class, each a FIFO of (seq, tp, key). A
    source whose outgoing cap is full is skipped as a whole; a decision looks at a lane's head and
    walks in only while it admits steps (or, past a blocked one, for at most SCAN more)."""

    sources: immutables.Map = immutables.Map()  # source -> Map(lane -> Chain)
    size: int = 0
    # the ready steps that take no limit (``at_alter``), also by seq: seq -> (tp, key, lane), so that a
    # decision starts them in the order they became ready, looking at nothing else
    free: immutables.Map = immutables.Map()

    def add(self, key: SchedulingKey, lane: int, seq: int, tp: TopicPartition,
            request_id: str = "") -> tuple["ReadyIndex", Slot]:
        src = key.source
        lanes = self.sources.get(src) or immutables.Map()
        name = (request_id, 0 if key.moves_leader else 1, lane)
        chain, pos = (lanes.get(name) or Chain()).push((seq, tp, key))
        free = self.free.set(seq, (tp, key, name)) if at_alter(key.nr, key.weight) else self.free
        return (ReadyIndex(self.sources.set(src, lanes.set(name, chain)), self.size + 1, free),
                Slot(src, name, pos))

    def remove(self, slot: Slot) -> "ReadyIndex":
        lanes = self.sources[slot.source]
        seq, _tp, key = lanes[slot.lane].entry(slot.pos)
        chain = lanes[slot.lane].delete(slot.pos)
        lanes = lanes.set(slot.lane, chain) if len(chain) else lanes.delete(slot.lane)
        sources = self.sources.set(slot.source, lanes) if len(lanes) else self.sources.delete(slot.source)
        free = self.free.delete(seq) if at_alter(key.nr, key.weight) else self.free
        return ReadyIndex(sources, self.size - 1, free)

    def __iter__(self) -> Iterator[TopicPartition]:  # type: ignore[override]
        for lanes in self.sources.values():
            for chain in lanes.values():
                for _seq, tp, _key in chain:
                    yield tp


class InFlight(NamedTuple):
    """Counters of the steps in flight, one per limit."""

    partitions: int = 0
    leader_moves: int = 0
    additions: int = 0
    incoming: immutables.Map = immutables.Map()  # broker -> copies into it, in WEIGHT_UNITS
    outgoing: immutables.Map = immutables.Map()  # broker -> copies out of it, in WEIGHT_UNITS
    new_replicas: immutables.Map = immutables.Map()  # broker -> new replicas it creates, whatever their size
    feeds: immutables.Map = immutables.Map()  # broker -> Map(source -> copies into it that weigh something)
    fed: immutables.Map = immutables.Map()  # source -> Map(broker -> copies out of it that weigh something)

    def plus(self, step: Step, sign: int = 1, weight: int = WEIGHT_UNITS) -> "InFlight":
        """One step more (``sign`` -1: less), charged against the leader it was planned from."""
        return self.charge(step.nr, step.source, step.moves_leader, sign, weight)

    def minus(self, step: Step, weight: int = WEIGHT_UNITS) -> "InFlight":
        return self.plus(step, -1, weight)

    def charge(self, nr: Replicas, source: int | None, moves_leader: bool, sign: int = 1,
               weight: int = WEIGHT_UNITS) -> "InFlight":
        """One step more (or less) that copies ``nr`` out of ``source`` and, if ``moves_leader``,
        moves leadership (``engine.core.state`` charges a step in flight to its partition's leader as
        last observed: a new leader serves its copies, and decides whether it moves leadership)."""
        if at_alter(nr, weight):
            return self
        incoming, outgoing, new_replicas = self.incoming, self.outgoing, self.new_replicas
        feeds, fed = self.feeds, self.fed
        if nr and weight and source is not None:
            feeds, fed = _pairs(feeds, fed, nr, source, sign)
        if nr:
            with incoming.mutate() as m:
                for b in nr:
                    _bump(m, b, sign * weight)
                incoming = m.finish()
            with new_replicas.mutate() as m:
                for b in nr:
                    _bump(m, b, sign)
                new_replicas = m.finish()
            with outgoing.mutate() as m:
                _bump(m, source, sign * weight * len(nr))
                outgoing = m.finish()
        return InFlight(
            self.partitions + sign,
            self.leader_moves + (sign if moves_leader else 0),
            self.additions + sign * len(nr),
            incoming,
            outgoing,
            new_replicas,
            feeds,
            fed,
        )

    def recharge(self, nr: Replicas, weight: int, old: tuple[int | None, bool],
                 new: tuple[int | None, bool]) -> "InFlight":
        """A step in flight moved from (source, moves leader) ``old`` to ``new``: its copies' outgoing
        charge follows the source, its L charge whether it moves leadership; the rest stays."""
        if old == new or at_alter(nr, weight):
            return self
        outgoing, feeds, fed = self.outgoing, self.feeds, self.fed
        if nr and old[0] != new[0]:
            with outgoing.mutate() as m:
                _bump(m, old[0], -weight * len(nr))
                _bump(m, new[0], weight * len(nr))
                outgoing = m.finish()
            if weight:
                if old[0] is not None:
                    feeds, fed = _pairs(feeds, fed, nr, old[0], -1)
                if new[0] is not None:
                    feeds, fed = _pairs(feeds, fed, nr, new[0], 1)
        return self._replace(outgoing=outgoing, feeds=feeds, fed=fed,
                             leader_moves=self.leader_moves + int(new[1]) - int(old[1]))


def _pairs(feeds: immutables.Map, fed: immutables.Map, nr: Replicas, source: int,
           sign: int) -> tuple[immutables.Map, immutables.Map]:
    """``feeds`` and ``fed`` with one copy more (``sign`` -1: less) out of ``source`` into each of ``nr``."""
    with feeds.mutate() as m:
        for b in nr:
            inner = m.get(b) or immutables.Map()
            with inner.mutate() as i:
                _bump(i, source, sign)
                inner = i.finish()
            if inner:
                m[b] = inner
            elif b in m:
                del m[b]
        feeds = m.finish()
    inner = fed.get(source) or immutables.Map()
    with inner.mutate() as i:
        for b in nr:
            _bump(i, b, sign)
        inner = i.finish()
    fed = fed.set(source, inner) if inner else (fed.delete(source) if source in fed else fed)
    return feeds, fed


def _bump(m, key, delta: int) -> None:
    if not delta:
        return  # a copy that weighs nothing (``weight_units``): no entry to make or to remove
    value = m.get(key, 0) + delta
    if value:
        m[key] = value
    else:
        del m[key]


A = "additions"  # the cluster-wide cap on replica additions, as a resource


def creation_caps(limits: Limits, seconds: float | None, largest: int | None = None) -> tuple[int, int]:
    """(in flight, per decision): how many new replicas a broker that makes one in ``seconds`` (``None``:
    not known yet) may be asked to create at once, and in one decision (one alter: its new replicas
    start fetching together, once the last of their logs exists). Unknown: ``max_new_replicas_per_broker``
    both. Known: what it makes in ``creation_window_ms`` per decision (rounded up: an engine whose cycle
    is about W sees each batch take about W, and would never ask for more), twice that in flight (one batch
    created while the next is decided), but never more than twice ``largest`` (the most new replicas of
    one alter it was seen to complete: a batch grows at most twofold past what the broker was seen to
    handle, whatever the estimate says), never fewer than ``max_new_replicas_per_broker``."""
    floor = limits.max_new_replicas_per_broker
    if seconds is None or seconds <= 0:
        return floor, floor
    batch = math.ceil(limits.creation_window_ms / 1000 / seconds - 1e-9)
    in_flight, per = 2 * batch, batch
    if largest is not None:
        in_flight, per = min(in_flight, 2 * largest), min(per, 2 * largest)
    return max(floor, in_flight), max(floor, per)


Creations = Callable[[int], tuple[int, int]]  # broker -> creation_caps of it


def _fixed(limits: Limits) -> Creations:
    caps = (limits.max_new_replicas_per_broker,) * 2
    return lambda _b: caps


def _new_full(c: InFlight, b: int, caps: tuple[int, int], base: InFlight | None) -> bool:
    """Whether broker ``b`` may not be asked for one more new replica: ``caps`` in flight reached, or
    (``base``: the counters when this decision began) its share of this decision."""
    n = c.new_replicas.get(b, 0)
    return n >= caps[0] or (base is not None and n - base.new_replicas.get(b, 0) >= caps[1])


def refusal(c: InFlight, limits: Limits, key: SchedulingKey, creations: Creations | None = None,
            base: InFlight | None = None) -> object | None:
    """What stops one more step with ``key`` from starting given the counters ``c``: ``None`` (it
    may start), ``"P"``, ``"L"``, ``A`` or the per-broker resource ``("in", b)`` / ``("out", b)``.
    ``creations``: each broker's new-replica caps (``creation_caps``; default: the fixed
    ``max_new_replicas_per_broker``); ``base``: the counters when this decision began (its share per
    decision is then enforced)."""
    if at_alter(key.nr, key.weight):
        return None
    if c.partitions >= limits.max_partitions_in_flight:
        return "P"
    if key.moves_leader and c.leader_moves >= limits.max_leader_moves_in_flight:
        return "L"
    n = len(key.nr)
    if n:
        if c.additions + n > limits.max_replica_additions_in_flight:
            return A
        w = key.weight
        cap_in = limits.max_incoming_moves_per_broker * WEIGHT_UNITS
        caps = creations or _fixed(limits)
        for b in key.nr:
            if c.incoming.get(b, 0) + w > cap_in or _new_full(c, b, caps(b), base):
                return ("in", b)
        if c.outgoing.get(key.source, 0) + n * w > limits.max_outgoing_moves_per_broker * WEIGHT_UNITS:
            return ("out", key.source)
    return None


def lacking(c: InFlight, limits: Limits, key: SchedulingKey, creations: Creations | None = None,
            base: InFlight | None = None) -> set:
    """Every per-broker resource (``("in", b)``, ``("out", b)``) and ``A`` a step with ``key`` lacks
    given the counters ``c``: what keeps it from starting besides P and L."""
    n = len(key.nr)
    if not n:
        return set()
    out: set = set()
    if c.additions + n > limits.max_replica_additions_in_flight:
        out.add(A)
    w = key.weight
    cap_in = limits.max_incoming_moves_per_broker * WEIGHT_UNITS
    caps = creations or _fixed(limits)
    for b in key.nr:
        if c.incoming.get(b, 0) + w > cap_in or _new_full(c, b, caps(b), base):
            out.add(("in", b))
    if c.outgoing.get(key.source, 0) + n * w > limits.max_outgoing_moves_per_broker * WEIGHT_UNITS:
        out.add(("out", key.source))
    return out


def admits(c: InFlight, limits: Limits, key: SchedulingKey) -> bool:
    """Whether one more step with ``key`` may start given the counters ``c``."""
    return refusal(c, limits, key) is None


def oversized(limits: Limits, key: SchedulingKey) -> bool:
    """A step that could never start under these limits, even alone (planned before they shrank)."""
    n = len(key.nr)
    return n > limits.max_replica_additions_in_flight or n > limits.max_outgoing_moves_per_broker


def resources(key: SchedulingKey) -> set:
    """The capacity a step with ``key`` takes: its copies' brokers and the cluster-wide additions
    (any step that copies takes some of those). A step whose copies weigh nothing takes no outgoing
    capacity of its source; it still takes a new replica of each broker it copies into (``("in", b)``
    stands for both of a broker's incoming caps)."""
    if not key.nr:
        return set()
    out = {A, *(("in", b) for b in key.nr)}
    return out | {("out", key.source)} if key.weight else out


# --- a decision ------------------------------------------------------------


class Start(NamedTuple):
    tp: TopicPartition
    step: Step
    weight: int = WEIGHT_UNITS


class Requeue(NamedTuple):
    """The partition's next step changed since it became ready (new observation)."""

    tp: TopicPartition
    step: Step


class Hold(NamedTuple):
    """The partition cannot progress now (or is done): the caller decides what it is."""

    tp: TopicPartition
    result: object  # step.Waiting or step.Done


Decision = Start | Requeue | Hold

Replan = Callable[[TopicPartition], object]  # -> Step | Waiting | Done, or None: not looked at just now
Rank = Callable[[str], int]  # request id -> its rank (steps started + where it joined)
Weigh = Callable[[TopicPartition, Step], int]  # -> the step's weight, in WEIGHT_UNITS


PIN_IN, PIN_OUT, PINNED = "pin-in", "pin-out", "pinned"
"""Why a copy that weighs something waits for the dominant source (``pinned``; docs/algorithm.md, section 2,
"A dominant source"): PIN_IN, a copy out of it into a broker another source copies into (that broker
drains for it); PIN_OUT, a copy out of it into another broker than the one it is pinned to; PINNED,
another source's copy into the broker it is pinned to."""

DOMINANCE = 2
"""A source is dominant when it has at least this many times the ready steps of any other source
(``dominant``)."""


def dominant(index: ReadyIndex, live: frozenset[int] | None = None) -> int | None:
    """The source with the most ready steps if it has at least DOMINANCE times those of every other
    source, and another source has some (a lone source pinned would only copy into fewer brokers at
    once, its rate the same), and it is live (``live``: the live brokers, ``None``: not known, every
    broker counts as live; a dead source's copies wait anyway, and must not hold others' meanwhile)
    (``None``: none). O(lanes)."""
    best, second, found = 0, 0, None
    for src, lanes in index.sources.items():
        if src is None:
            continue
        n = sum(len(chain) for chain in lanes.values())
        if n > best:
            best, second, found = n, best, src
        elif n > second:
            second = n
    if found is None or not second or best < DOMINANCE * second:
        return None
    return found if live is None or found in live else None


def _window(index: ReadyIndex, src: int) -> Iterator[tuple]:
    """The entries (seq, tp, key) of the ready steps out of ``src`` a decision can reach, with their
    lane's request id: the first SCAN + 1 of each of its lanes. O(SCAN x its lanes)."""
    for name, chain in (index.sources.get(src) or immutables.Map()).items():
        pos, n = chain.head, 0
        while pos >= 0 and n <= SCAN:
            yield name[0], chain.entry(pos)
            pos, n = chain.after(pos), n + 1


def _keys(index: ReadyIndex, src: int) -> Iterator[SchedulingKey]:
    for _rid, (_seq, _tp, key) in _window(index, src):
        yield key


def requests_of(index: ReadyIndex, dom: int | None) -> frozenset[str]:
    """The requests with a ready step out of ``dom``: only their other steps wait for it (the pin and the
    drain); another request's keeps its turn (start-time fair queueing: a small urgent request is not held
    behind a decommission's dominant leader). O(its lanes)."""
    if dom is None:
        return frozenset()
    return frozenset(name[0] for name in (index.sources.get(dom) or immutables.Map()))


def pins(index: ReadyIndex, c: InFlight, dom: int | None, live: frozenset[int] | None = None) -> frozenset[int]:
    """The brokers the dominant source ``dom`` is pinned to: the live ones (``live``; ``None``: every
    broker) it copies something that weighs into now and has a ready copy that weighs something for
    (within reach: ``_window``). A broker it copies into and has no more copies for is not held for it:
    its last copy may share the broker with other sources' while it starts on the next broker. A dead
    broker is never pinned: a copy into it stays in flight until it returns, and the source's copies into
    other brokers would wait as long. O(SCAN x its lanes)."""
    if dom is None:
        return frozenset()
    fed = c.fed.get(dom)
    if not fed:
        return frozenset()
    return frozenset(b for key in _keys(index, dom) if key.weight for b in key.nr
                     if b in fed and (live is None or b in live))


def pinned(c: InFlight, key: SchedulingKey, dom: int | None, pinned_to: frozenset[int],
           live: frozenset[int] | None = None, rid: str | None = None,
           held_requests: frozenset[str] | None = None) -> str | None:
    """What keeps a copy that weighs something from ``key.source`` into ``key.nr`` waiting for the
    dominant source ``dom`` pinned to the brokers ``pinned_to`` (``pins``): PINNED (another source's
    copy, of one of ``held_requests`` (``requests_of``; ``None``: any), into one of them), PIN_OUT (a copy
    out of ``dom`` into another broker while it is pinned), PIN_IN (a copy out of ``dom`` into a live
    broker another live source copies into: a dead one never drains); ``None``: nothing (no dominant
    source, a copy that weighs nothing, another request's copy, or none of these). ``rid``: the copy's
    request."""
    if dom is None or not key.weight or key.source is None or not key.nr:
        return None
    if key.source != dom:
        if held_requests is not None and rid not in held_requests:
            return None
        return PINNED if any(b in pinned_to for b in key.nr) else None
    if pinned_to and any(b not in pinned_to for b in key.nr):
        return PIN_OUT
    for b in key.nr:
        into = c.feeds.get(b)
        if (into is not None and (live is None or b in live)
                and any(s != dom and (live is None or s in live) for s in into)):
            return PIN_IN
    return None


def _reserved_for_pin(key: SchedulingKey, reserved: set, rid: str, held_requests: frozenset[str]) -> bool:
    """Whether ``key``'s copies (of request ``rid``) are held by the dominant source's reservation
    (``next_batch``): a broker reserved for it (a copy of one of ``held_requests``), or it reserved for
    another broker."""
    for r in reserved:
        if (r[0] == PIN_IN and r[1] in key.nr and r[2] != key.source and rid in held_requests) or (
                r[0] == PIN_OUT and r[1] == key.source and any(b not in r[2] for b in key.nr)):
            return True
    return False


def _can_start_free(index: ReadyIndex, c: InFlight, limits: Limits, dom: int, pinned_to: frozenset[int],
                    creations: Creations | None, base: InFlight, live: frozenset[int] | None = None) -> bool:
    """Whether the dominant source has a ready copy that weighs something within reach (``_window``) that
    may start now, into brokers no other source copies into: then it starts that one, and reserves no
    broker to drain for it (it would idle meanwhile). O(SCAN x its lanes)."""
    return any(key.weight and key.nr and refusal(c, limits, key, creations, base) is None
               and pinned(c, key, dom, pinned_to, live) is None for key in _keys(index, dom))


DRAINED = "drained"
"""Why another source's copy waits (``pin_holds``): its broker drains for the dominant source, which has a
copy for it and none it may start elsewhere (``next_batch``'s reservation)."""


class PinHolds(NamedTuple):
    """What the dominant-source rule holds now (``pin_holds``): the dominant source (``None``: none), the
    brokers it is pinned to, those drained for it, and each ready step it holds -> (its key, why:
    PIN_IN, PIN_OUT, PINNED, DRAINED)."""

    source: int | None = None
    pinned_to: frozenset = frozenset()
    drained: frozenset = frozenset()
    held: dict = {}


def pin_holds(index: ReadyIndex, c: InFlight, limits: Limits, creations: Creations | None = None,
              live: frozenset[int] | None = None) -> PinHolds:
    """The ready steps the dominant-source rule holds given the counters ``c`` and the live brokers
    ``live``, for the views (``status``, the status page, /metrics), as ``next_batch`` holds them, among
    the steps a decision looks at (each lane's first SCAN + 1: the rest are queued behind them, held by
    nothing): a step a cap refuses is not counted (the cap is its reason); a broker drains for the source
    when it has a copy for it that fits every cap and none it may start elsewhere (a decision reserves the
    brokers of its oldest such copy: one of these). O(SCAN x lanes), as a decision: every status call and
    /metrics scrape runs it."""
    dom = dominant(index, live) if limits.pin_dominant_source else None
    if dom is None:
        return PinHolds()
    to = pins(index, c, dom, live)
    mine = requests_of(index, dom)
    drained: set = set()
    if not _can_start_free(index, c, limits, dom, to, creations, c, live):
        for key in _keys(index, dom):
            if refusal(c, limits, key, creations) is None and pinned(c, key, dom, to, live) == PIN_IN:
                drained.update(key.nr)
    held: dict = {}
    for src in index.sources:
        for rid, (_seq, tp, key) in _window(index, src):
            if refusal(c, limits, key, creations) is not None:
                continue
            why = pinned(c, key, dom, to, live, rid, mine)
            if (why is None and src != dom and key.weight and rid in mine
                    and any(b in drained for b in key.nr)):
                why = DRAINED
            if why is not None:
                held[tp] = (key, why)
    return PinHolds(dom, to, frozenset(drained), held)


SCAN = 16
"""Past a blocked step, a decision looks at most this many more steps of the same lane: a decision
costs O(lanes + steps started + SCAN x lanes), never O(queue)."""


def next_batch(index: ReadyIndex, in_flight: InFlight, limits: Limits, replan: Replan,
               rank: Rank = lambda _rid: 0, weigh: Weigh = lambda _tp, _step: WEIGHT_UNITS,
               creations: Creations | None = None, live: frozenset[int] | None = None) -> list[Decision]:
    """Choose the steps to start now (the module doc has the order and the rules).

    ``replan(tp)`` returns the partition's next step from the latest observation, or ``None`` when
    the partition was not looked at just now (it stays ready and takes nothing: a step starts only
    from a fresh look at its partition's leader); a partition whose step changed since it was
    queued is re-queued (or held) instead of started, so a stale plan never runs.
    ``rank(request_id)`` orders requests (lowest first); it grows by one per step a request starts
    here. ``creations(broker)``: its new-replica caps (in flight, this decision: ``creation_caps``);
    default: ``max_new_replicas_per_broker`` both. ``live``: the live brokers (``None``: not known, every
    broker counts as live): the dominant-source rule pins only to live brokers, and only a live source.
    """
    started: dict[str, int] = {}
    out: list[Decision] = []
    # the drops Kafka completes at their alter (``at_alter``) take no limit: they start first, in the order
    # they became ready, whatever the counters, at most FREE_PER_DECISION (O(those, log))
    for seq in sorted(index.free.keys()):
        if len(out) >= FREE_PER_DECISION:
            break
        tp, key, name = index.free[seq]
        _decide(out, tp, key, replan(tp), weigh, started, name[0])
    if in_flight.partitions >= limits.max_partitions_in_flight:
        return out
    out_cap = limits.max_outgoing_moves_per_broker * WEIGHT_UNITS
    # One heap per request, ordered by (class, readiness, seq), and one over the requests' heads,
    # ordered by (class, readiness, rank, seq): a pop costs O(log lanes + log requests), never a look
    # at every request. A request's entry there is refreshed (a new version) whenever its head or its
    # rank changed; older versions are skipped.
    heaps: dict[str, list] = {}
    for src, lanes in index.sources.items():
        if src is not None and in_flight.outgoing.get(src, 0) >= out_cap:
            # every step of this source copies out of it: none that weighs anything may start; those that
            # weigh nothing (``weight_units``) wait for it too (a lane is not searched past its head)
            continue
        for name, chain in lanes.items():
            seq, _tp, _key = chain.entry(chain.head)
            heaps.setdefault(name[0], []).append((name[1], name[2], seq, src, name, chain.head, 0))
    top: list = []
    version: dict[str, int] = {}

    def refresh(rid: str) -> None:
        v = version[rid] = version.get(rid, 0) + 1
        h = heaps[rid]
        if h:
            cls, lane_no, seq = h[0][:3]
            heapq.heappush(top, (cls, lane_no, rank(rid) + started.get(rid, 0), seq, rid, v))

    for rid, h in heaps.items():
        heapq.heapify(h)
        refresh(rid)
    dirty: set = set()

    def pop():
        for rid in dirty:
            refresh(rid)
        dirty.clear()
        while top:
            entry = heapq.heappop(top)
            rid = entry[4]
            if entry[5] == version[rid]:
                dirty.add(rid)  # its head is taken, and its rank may grow: refreshed at the next pop
                return heapq.heappop(heaps[rid])
        return None

    def push(name: tuple, src, pos: int, skipped: int) -> None:
        chain = index.sources[src][name]
        heapq.heappush(heaps[name[0]], (name[1], name[2], chain.entry(pos)[0], src, name, pos, skipped))
        dirty.add(name[0])

    dom = dominant(index, live) if limits.pin_dominant_source else None
    pinned_to = pins(index, in_flight, dom, live)
    held_requests = requests_of(index, dom)
    free: bool | None = None  # whether the dominant source may start a copy without a broker drained for it
    c = in_flight
    reserved: set = set()
    leaders_full = False
    while c.partitions < limits.max_partitions_in_flight:
        top_entry = pop()
        if top_entry is None:
            break
        _cls, _lane_no, seq, src, name, pos, skipped = top_entry
        chain = index.sources[src][name]
        _seq, tp, key = chain.entry(pos)
        if at_alter(key.nr, key.weight):
            nxt = chain.after(pos)
            if nxt >= 0:
                push(name, src, nxt, skipped)
            continue  # decided above
        if key.moves_leader and leaders_full:
            continue  # L is full: no leader-moving step of any lane may start
        why = refusal(c, limits, key, creations, in_flight)
        if why is None and reserved & resources(key):
            why = "reserved"
        if why is None and key.weight and key.source is not None and key.nr:
            why = ("reserved" if _reserved_for_pin(key, reserved, name[0], held_requests)
                   else pinned(c, key, dom, pinned_to, live, name[0], held_requests))
        nxt = chain.after(pos)
        if why is not None and not oversized(limits, key):
            if why == "L":
                leaders_full = True
                continue
            if why == PIN_IN and not reserved:
                # the dominant source's oldest copy held by another source's in its broker: unless the source
                # may start a copy elsewhere, that broker takes no other source's copy, and the source copies
                # into no other broker, until it starts
                if free is None:
                    free = _can_start_free(index, c, limits, key.source, pinned_to, creations, in_flight, live)
                if not free:
                    reserved = {(PIN_IN, b, key.source) for b in key.nr} | {(PIN_OUT, key.source, key.nr)}
            elif why not in ("P", "reserved", PIN_IN, PIN_OUT, PINNED) and not reserved:
                # The oldest blocked step keeps the capacity it lacks (its brokers', or the cluster-wide
                # additions) so no younger step takes it first; never capacity it has room on: that it
                # could not use before what it lacks frees, which may be never (a step into its target
                # stuck on a dead replica).
                reserved = lacking(c, limits, key, creations, in_flight)
            if nxt >= 0 and skipped < SCAN and why != ("out", src):
                push(name, src, nxt, skipped + 1)
            continue
        result = replan(tp)
        if result is None:
            pass  # not looked at just now: it stays ready, for a later decision
        elif isinstance(result, Step):
            new_key = SchedulingKey.of(result, weigh(tp, result))
            if new_key == key and why is None:
                out.append(Start(tp, result, key.weight))
                c = c.plus(result, 1, key.weight)
                if dom is not None and key.source == dom and key.weight:
                    pinned_to = pinned_to | frozenset(b for b in key.nr if live is None or b in live)  # it feeds them now, and has a copy for them
                started[name[0]] = started.get(name[0], 0) + 1
            elif new_key != key:
                out.append(Requeue(tp, result))
        else:
            out.append(Hold(tp, result))
        if nxt >= 0:
            push(name, src, nxt, skipped)
    return out


def _decide(out: list, tp: TopicPartition, key: SchedulingKey, result, weigh: Weigh, started: dict,
            rid: str) -> None:
    """A step that takes no limit (``at_alter``): started if its fresh plan is still the one queued,
    re-queued if it changed, held if it has none; ``None``: not looked at just now, it stays ready."""
    if result is None:
        return
    if isinstance(result, Step):
        new_key = SchedulingKey.of(result, weigh(tp, result))
        if new_key == key:
            out.append(Start(tp, result, key.weight))
            started[rid] = started.get(rid, 0) + 1
        else:
            out.append(Requeue(tp, result))
    else:
        out.append(Hold(tp, result))
