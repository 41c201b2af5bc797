"""The smallest schedule that still fails the same way, and the few lines of its trace that matter.

``shrink(plan, violation)`` drops items of the plan's schedule (delta debugging: halves, then
quarters ... then single items) while the run still shows a violation of the same check with the
same label; the cluster and the time faults stop stay as drawn. Each item draws from its own
sub-seed, so dropping one leaves the others as they were. ``story(result, violation)`` is the
trace of the shrunk run cut to what concerns the failure: the faults, the commands, and the
engine's events on the partitions it names, up to the failure.
"""

from __future__ import annotations

from typing import Callable

from engine.whatif.fuzz.classify import label
from engine.whatif.fuzz.plan import Plan
from engine.whatif.fuzz.simulation import Result, run
from engine.whatif.fuzz.world import Violation


def same(violation: Violation) -> Callable[[Result], Violation | None]:
    """What "still fails the same way" means: a violation of the same check, with the same label."""
    def match(result: Result) -> Violation | None:
        for v in label(result.violations):
            if v.check == violation.check and v.defect == violation.defect:
                return v
        return None
    return match


def shrink(plan: Plan, violation: Violation, budget: int = 400) -> tuple[Plan, Result, int]:
    """The smallest plan found within ``budget`` runs that still fails like ``violation``, its run and
    the number of runs it took."""
    match = same(violation)
    items = list(plan.items)
    runs = 0
    best = run(plan)
    n = 2
    while len(items) >= 1 and runs < budget:
        size = max(1, -(-len(items) // n))
        for start in range(0, len(items), size):
            trial = items[:start] + items[start + size:]
            result = run(plan.without(items[start:start + size]))
            runs += 1
            if match(result):
                plan, items, best = plan.without(items[start:start + size]), trial, result
                n = max(n - 1, 2)
                break
            if runs >= budget:
                break
        else:
            if size == 1:
                break
            n = min(len(items), n * 2)
    return plan, best, runs


def story(result: Result, violation: Violation, limit: int = 30) -> list[str]:
    """The lines of the run's trace that tell the failure: every fault and command, the engine's events
    about the partitions the violation names, up to the violation itself."""
    names = {str(tp) for tp in violation.tps}
    out = []
    for line in result.trace:
        at, _, text = line[2:].strip().partition(" ")
        if float(at) > violation.at + 1e-9:
            break
        engine = text.startswith("engine:") or text.startswith("VIOLATION")
        if not engine or any(n in text.replace(",", " ").split() for n in names) or not names:
            out.append(line)
    if len(out) > limit:
        out = out[:3] + [f"... {len(out) - limit + 3} lines ..."] + out[-(limit - 4):]
    return out + [f"t={violation.at:7.2f} {violation.line()}"]
