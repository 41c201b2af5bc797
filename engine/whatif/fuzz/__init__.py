"""A deterministic fault simulator for the whole engine (issue 27), as FoundationDB and TigerBeetle
test theirs: the real decider, executor, log, snapshots, restarts and recovery against the simulated
KRaft cluster on virtual time, faults and commands drawn from a seed, invariants after every step.

``plan`` (what a seed runs), ``world`` (the simulated cluster through the faults, the engine's clock
and log), ``simulation`` (one run), ``checks`` (the invariants), ``classify`` (which defect of issue
27 a failure shows), ``shrink`` (the smallest schedule that still fails). ``python -m
benchmarks.fuzz`` runs seeds; docs/benchmarks.md has the figures.
"""

from engine.whatif.fuzz.plan import FAULTS, Item, Plan, draw
from engine.whatif.fuzz.simulation import Result, run

__all__ = ["FAULTS", "Item", "Plan", "Result", "draw", "run"]
