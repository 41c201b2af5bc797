"""The deterministic fault simulator (engine.whatif.fuzz) over many seeds, or one seed replayed.

    python -m benchmarks.fuzz --seeds 1000 [--start 0] [--faults crash,torn,...] [--shrink]
    python -m benchmarks.fuzz --seed 5 [--faults ...] [--no-shrink]

Many seeds: one line per failing seed (its first failure, labelled with the defect of issue 27 it
shows, and the command that replays it), then per label the first seed that showed it and how many
did, and the seeds run per second. One seed: the cluster and the schedule drawn from it, every
failure, then the schedule shrunk to the items the first failure needs and the lines of its trace
that tell it (``--no-shrink`` skips that). ``--json``: the summary as one JSON line. The exit code
is 1 when a seed failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

from engine.whatif.fuzz.classify import label
from engine.whatif.fuzz.plan import FAULTS, draw
from engine.whatif.fuzz.shrink import shrink, story
from engine.whatif.fuzz.simulation import run


def replay(seed: int, faults: list[str] | None) -> str:
    if faults is None:
        return f"python -m benchmarks.fuzz --seed {seed}"
    return f"python -m benchmarks.fuzz --seed {seed} --faults {','.join(faults) or 'none'}"


def plan_of(seed: int, faults: list[str] | None):
    plan = draw(seed)
    return plan.only(faults) if faults is not None else plan


def one(seed: int, faults: list[str] | None, do_shrink: bool) -> int:
    plan = plan_of(seed, faults)
    started = time.perf_counter()
    result = run(plan)
    took = time.perf_counter() - started
    print(f"seed {seed}: {result.ticks} ticks, {result.events} events, {result.restarts} restarts, "
          f"{result.end:.0f} s simulated in {took:.2f} s; digest {result.digest}")
    for line in plan.describe():
        print("  " + line)
    for item in plan.items:
        print("  " + item.line())
    violations = label(result.violations)
    if not violations:
        print("no failure")
        return 0
    for v in violations:
        print(v.line())
    print(f"replay: {replay(seed, faults)}")
    if do_shrink:
        first = violations[0]
        small, shrunk, runs = shrink(plan, first)
        print(f"\nshrunk in {runs} runs to {len(small.items)} of {len(plan.items)} items:")
        for item in small.items:
            print("  " + item.line())
        match = next((v for v in label(shrunk.violations) if v.check == first.check and v.defect == first.defect), first)
        print("trace:")
        for line in story(shrunk, match):
            print("  " + line)
    return 1


def many(start: int, count: int, faults: list[str] | None, do_shrink: bool, as_json: bool) -> int:
    labels: Counter = Counter()
    first: dict[str, int] = {}
    failed = 0
    started = time.perf_counter()
    for seed in range(start, start + count):
        result = run(plan_of(seed, faults))
        violations = label(result.violations)
        if not violations:
            continue
        failed += 1
        seen = sorted({part for v in violations for part in v.defect.split("+")})  # D2+D6 counts for both
        for name in seen:
            labels[name] += 1
            first.setdefault(name, seed)
        if not as_json:
            print(f"seed {seed}: {violations[0].line()[:240]}  [{', '.join(seen)}]  replay: {replay(seed, faults)}")
            if do_shrink:
                small, shrunk, runs = shrink(plan_of(seed, faults), violations[0])
                print(f"  shrunk to {len(small.items)} items ({runs} runs): " + "; ".join(i.line() for i in small.items))
    took = time.perf_counter() - started
    summary = {"seeds": count, "start": start, "failed": failed, "seconds": round(took, 2),
               "seeds_per_second": round(count / took, 2) if took else None,
               "by_label": {k: {"seeds": labels[k], "first_seed": first[k]} for k in sorted(labels)},
               "faults": list(FAULTS) if faults is None else faults, "load_average": round(os.getloadavg()[0], 2)}
    if as_json:
        print(json.dumps(summary))
    else:
        print(f"\n{count} seeds ({start}..{start + count - 1}) in {took:.1f} s: {summary['seeds_per_second']} seeds/s "
              f"(load average {summary['load_average']}); {failed} failed")
        for k in sorted(labels):
            print(f"  {k}: {labels[k]} seeds, first {first[k]}")
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, help="how many seeds to run (from --start)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, help="run one seed and show it")
    p.add_argument("--faults", help=f"fault classes to keep (default: all of {','.join(FAULTS)}; none: commands only)")
    p.add_argument("--shrink", action="store_true", help="with --seeds: shrink each failing seed too")
    p.add_argument("--no-shrink", action="store_true", help="with --seed: do not shrink")
    p.add_argument("--json", action="store_true", help="with --seeds: one JSON line")
    a = p.parse_args(argv)
    faults = None
    if a.faults is not None:
        faults = [f.strip() for f in a.faults.split(",") if f.strip() and f.strip() != "none"]
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            p.error(f"unknown fault classes {unknown}: expected some of {', '.join(FAULTS)}")
    if a.seed is not None:
        return one(a.seed, faults, not a.no_shrink)
    if a.seeds is None:
        p.error("give --seeds N or --seed S")
    return many(a.start, a.seeds, faults, a.shrink, a.json)


if __name__ == "__main__":
    sys.exit(main())
