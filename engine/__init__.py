"""kreassign: event-sourced partition reassignment for Apache Kafka.

Read top-down, one package per role; each package's docstring says what lives
there and what it may import (``tests/test_layout.py`` enforces it):

* ``engine.core``: the pure core. Values, the KIP-435 step planner, the batch
  scheduler, KIP-73 throttles, KIP-236 cancellation, limits, the retry policy,
  commands and events, the actions the engine asks of a cluster and their
  outcomes, ``decide`` and the fold (``state.apply``), the balancer. No I/O,
  no clock, no Kafka; imports nothing else of kreassign.
* ``engine.views``: pure read models of the state (what ``status``, the status
  page, ``/tables`` and the verdicts show). Import only the core.
* ``engine.kafka``: the Kafka edge. Client settings, authorization names and
  probes, kreassign's topics and groups, broker profiles, the embedded broker.
* ``engine.log``: the event log on Kafka. Avro codecs, envelopes, the writer
  and readers, snapshots, replay, signing, dead letters.
* ``engine.sim``: the simulated cluster (KRaft's controller rules and the
  copy physics on a virtual clock, its HTTP and Kafka-protocol fronts). Uses
  the core; nothing below it uses the simulated cluster.
* ``engine.cluster``: the one interface to a cluster and its adapters (Apache
  Kafka, a remote simulated cluster).
* ``engine.runtime``: the running engine. The decider loop, the executor, the
  Faust worker, ``/metrics`` and the status page.
* ``engine.whatif``: the engine's core run on the simulated cluster in virtual
  time, to compare strategies before touching a cluster (``kreassign simulate``).
* ``engine.cli``: the ``kreassign`` command, one module per subcommand.

``engine.bundled`` finds the files shipped beside the code (Avro schemas,
scenarios). Where does something new go? A rule about steps, caps, throttles
or cancellation: ``engine.core``. A new event: ``engine.core.events`` (and its
schema in ``schemas/``). A new client call: an adapter in ``engine.cluster``
(its outcome becomes a ``engine.core.outcomes`` value). A new line in
``status``: ``engine.views``.
"""

__version__ = "0.1.0"
