"""Seeded balancer cases (``case(seed)``): a few brokers, racks of several layouts, mixed replication
factors, sizes of several kinds, and every mode of ``engine.core.balancer.propose``. Plain
``random.Random(seed)``: the same case for a seed on every machine, so figures computed once by an
older balancer (``tests/data/balancer_reference.json``) can be held against today's."""

from __future__ import annotations

import random

from engine.core.partition import TopicPartition


def case(seed: int) -> dict:
    """The arguments of ``propose`` for ``seed``, and the brokers eligible to hold replicas."""
    rng = random.Random(seed)
    n = rng.randint(2, 10)
    layout = rng.choice(["none", "one", "two", "three", "lonely", "partial"])
    if layout == "none":
        racks = {}
    elif layout == "lonely":
        racks = {b: "c" if b == 0 else "ab"[b % 2] for b in range(n + 3)}
    elif layout == "partial":
        racks = {b: ("ab"[b % 2] if b % 3 else None) for b in range(n + 3)}
    else:
        k = {"one": 1, "two": 2, "three": 3}[layout]
        racks = {b: "abc"[b % k] for b in range(n + 3)}
    rf_max = rng.randint(1, min(4, n))
    assignment = {}
    for i in range(rng.randint(1, 40)):
        brokers = list(range(n))
        rng.shuffle(brokers)
        assignment[TopicPartition(f"t{i % 3}", i)] = tuple(brokers[:rng.randint(1, rf_max)])
    kind = rng.choice(["rand", "equal", "two", "zero", "mixed0", "unknown", "none"])
    sizes = {
        "rand": lambda: {t: rng.randint(0, 1000) for t in assignment},
        "equal": lambda: {t: 7 for t in assignment},
        "two": lambda: {t: rng.choice([0, 5]) for t in assignment},
        "zero": lambda: {t: 0 for t in assignment},
        "mixed0": lambda: {t: rng.choice([0, 1, 1000]) for t in assignment},
        "unknown": lambda: {t: rng.randint(0, 50) for t in assignment if rng.random() < 0.5},
        "none": lambda: None,
    }[kind]()
    mode = rng.choice(["cluster-balance", "replica-balance", "add-brokers", "remove-brokers", "leader-balance",
                       "generate"])
    kw = {"threshold": rng.choice([0.0, 0.1, 0.3]), "rack_aware": rng.random() < 0.5, "down": []}
    known = set(range(n))
    eligible = known | {b for r in assignment.values() for b in r}
    if mode == "add-brokers":
        kw["add"] = list(range(n, n + rng.randint(1, 3)))
        eligible = known | set(kw["add"])
    elif mode == "remove-brokers":
        kw["remove"] = rng.sample(range(n), rng.randint(1, max(1, n - 1)))
        kw["down"] = [b for b in kw["remove"] if rng.random() < 0.5]
        eligible = known - set(kw["remove"])
    elif mode == "leader-balance":
        kw["down"] = rng.sample(range(n), rng.randint(0, n - 1))
    elif mode == "generate":
        kw["topics"] = ["t0", "t1"] if rng.random() < 0.5 else ["t0"]
        kw["broker_list"] = rng.sample(range(n), rng.randint(1, n))
        eligible = set(kw["broker_list"])
    return {"mode": mode, "assignment": assignment, "racks": racks, "brokers": list(range(n)), "sizes": sizes,
            "kw": kw, "eligible": eligible}
