"""Which defect of issue 27 a failure shows, read from what the failing check recorded.

Labels: ``D1`` .. ``D8`` (the issue's numbering), ``new`` for a failure none of them explains (read
its trace). The rules look at the evidence each defect leaves, not at the schedule that caused it:

* D1: a step not started whose alter failed, due for its retry, never retried: its CR holds a dead
  broker (whose throttle rate is never set, so the retry waits for throttles "in force" for ever);
  or, the same cause one step earlier, a ready step whose CR holds a dead broker held for ever by a
  failed throttle change on that broker's rate (never retried while it is dead);
* D2: a step being aborted whose cancel's answer is still due, the partition now another request's
  (the answer was dropped: it named the new request, the step the old one);
* D3: a step being aborted, every answer in, nothing in progress on the cluster, and the partition
  neither back at the step's CR nor at its TR;
* D4: a cap exceeded against the cluster's leaders and replica sets, the engine's look not torn;
* D5: a source broker idle while ready steps out of it fit every limit, and what they need (their
  source's outgoing capacity, their target's incoming one) is reserved for the oldest blocked step,
  which cannot use it while it lacks something else;
* D6: an unfinished request with a timer of the state far ahead of the engine's clock;
* D7: the working state keeps finished requests;
* D8: a false alarm while looks were torn, or what follows from one: a cap counted on a torn look,
  a partition left away from its target or the engine's view of it wrong, a throttle left set
  after a torn read-back made the log drop it.

Found by the fuzzer beyond the issue's list (``new`` until described):

* N1: a throttle change that names entries already in force (a recovery re-asserting them, a
  rate change, a step needing what another had set) fails (refused or unanswered); the log then
  holds those entries as not in force (``state.apply`` of ``ActionFailed``: "a failed apply is not
  in force"), though they are still set on the cluster: the next read-back reports them as left
  over (``ThrottlesDrifted``) although nobody changed anything;
* N2: kreassign's abort of a step (a cancel) leaves the partition with fewer in-sync replicas than
  min.insync.replicas although it had enough before (the new replicas had caught up, an original
  one is down): KRaft's revert drops the adding replicas from the ISR;
* N3: an alter that leaves the partition with fewer in-sync replicas than min.insync.replicas
  although it had enough before: a step planned while a replica was dead (rule 6 drops dead
  replicas out of the ISR) is retried after that replica came back and rejoined the ISR; the retry
  sends the old target unchanged and drops an in-sync replica.
"""

from __future__ import annotations

from engine.whatif.fuzz.world import Violation

DEFECTS = ("D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8")


def classify(v: Violation) -> str:
    f = v.facts
    if v.check == "bounded_state":
        return "D7"
    if v.check in ("view", "target"):
        return "D8" if f.get("torn") else "new"
    if v.check == "caps":
        return "D8" if f.get("torn") else "D4"
    if v.check == "false_alarm":
        if f.get("torn"):
            return "D8"
        if f.get("reapply_failed") and not f.get("missing"):
            return "N1"
        return "new"
    if v.check == "min_insync":
        return {"cancel": "N2", "alter": "N3"}.get(f.get("op"), "new")
    if v.check in ("throttle_left", "settled", "throttle_leak") and f.get("timers"):
        return "D6"
    if v.check in ("throttle_left", "throttle_leak") and f.get("torn"):
        return "D8"  # a read-back torn by metadata lag said an entry was missing: the log lost it
    if v.check == "idle_source":
        if f.get("timers"):
            return "D6"
        if f.get("held"):  # what the idle source's ready steps need is held for the oldest blocked step
            return "D5"
        return "new"
    if v.check == "liveness":
        labels = set()
        for row in f.get("rows", []):
            label = _stuck(row)
            if label:
                labels.add(label)
        if f.get("timers"):
            labels.add("D6")
        return "+".join(sorted(labels)) if labels else "new"
    return "new"


def _stuck(row: dict) -> str | None:
    f = row.get("step")
    ready = row.get("ready_step")
    if f is None:
        # the same cause before the first alter: the step is held until throttles it needs are in force,
        # and a rate on a dead broker is never set (nor its failure cleared)
        if (ready is not None and hasattr(ready, "cr") and set(ready.cr) & set(row["dead"])
                and set(row["throttle_failed_brokers"]) & set(row["dead"])):
            return "D1"
        return None
    busy = bool(row["adding"] or row["removing"])
    if f.aborting and f.answers_due > 0 and f.request_id != row["request"]:
        return "D2"
    if f.aborting and not f.answers_due and not busy:
        here = tuple(row["replicas"])
        if set(here) != set(f.step.cr) and here != tuple(f.step.tr):
            return "D3"
    if (not f.started and not f.aborting and f.retry and (f.retry_at is None or f.retry_at <= row["now"])
            and set(f.step.cr) & set(row["dead"])):
        return "D1"
    return None


def label(violations: list[Violation]) -> list[Violation]:
    for v in violations:
        v.defect = classify(v)
    return violations
