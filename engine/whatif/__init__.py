"""What-if: the engine's decisions run on the simulated cluster in virtual time.

``strategies`` runs a scenario's reassignment with kreassign's decider (its
core, executor and cadence), or as Kafka's tool or Cruise Control would; ``report`` measures the
runs against the physical lower bound (``kreassign simulate``); ``calibration``
sets twins of real-cluster records beside them, and ``turns`` plays a receiving
broker's fetchers by Kafka's quota rule fetch by fetch. ``fuzz`` is the
deterministic fault simulator of the whole engine (the decider, its executor,
log, snapshots and recovery against the simulated cluster, faults drawn from a
seed, invariants after every step: ``python -m benchmarks.fuzz``).

May import: ``engine.core``, ``engine.views``, ``engine.sim``,
``engine.runtime`` (its decider and executor), ``engine.log`` (the fault
simulator's envelopes and snapshots) and itself.
"""
