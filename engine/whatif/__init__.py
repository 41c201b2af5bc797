"""What-if: the engine's decisions run on the simulated cluster in virtual time.

``strategies`` runs a scenario's reassignment with kreassign's core and
executor, or as Kafka's tool or Cruise Control would; ``report`` measures the
runs against the physical lower bound (``kreassign simulate``).

May import: ``engine.core``, ``engine.views``, ``engine.sim``,
``engine.runtime`` (its executor) and itself.
"""
