"""Writes tests/data/balancer_reference.json: the figures an older balancer gives for the seeded cases of
tests/balancer_cases.py (replicas moved, bytes copied, replicas per broker, racks per partition).

    git archive a1f7ab6 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/data/make_balancer_reference.py 400 tests/data/balancer_reference.json

(run from the repository; the balancer imported is the one on PYTHONPATH, the cases are this tree's)."""

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

spec = importlib.util.spec_from_file_location("balancer_cases", Path(__file__).parent.parent / "balancer_cases.py")
cases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cases)

import engine.core.balancer as B  # noqa: E402  (the older tree's, from PYTHONPATH)
from engine.core.balancer.racks import distinct_racks  # noqa: E402

print("balancer of", B.__file__, file=sys.stderr)
out = {}
for seed in range(int(sys.argv[1])):
    c = cases.case(seed)
    try:
        p = B.propose(c["mode"], c["assignment"], c["racks"], c["brokers"], c["sizes"], **c["kw"])
    except B.BalanceError:
        out[seed] = None
        continue
    scope = {t: r for t, r in c["assignment"].items() if c["mode"] != "generate" or t.topic in c["kw"]["topics"]}
    after = {**scope, **p.proposed}
    counts = Counter(b for r in after.values() for b in r)
    out[seed] = {"replicas_moved": p.replicas_moved, "bytes_moved": p.bytes_moved,
                 "counts": {str(b): k for b, k in sorted(counts.items())},
                 "racks": {f"{t.topic}-{t.partition}": distinct_racks(r, c["racks"]) for t, r in sorted(after.items())}}
json.dump(out, open(sys.argv[2], "w"), separators=(",", ":"), sort_keys=True)
print(len(out), "cases,", sum(1 for v in out.values() if v is None), "refused", file=sys.stderr)
