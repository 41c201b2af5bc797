"""The running engine: the decider loop around the core, and its Faust worker.

``decider`` (one input at a time: decide, append, act, observe), ``executor``
(the actions the log asks for, carried out in log order), ``calls`` (every
cluster call of the decider under a deadline), ``worker`` (the Faust
app: router, decider agent, ticks, the status page and ``/status``),
``metrics`` (``/metrics``), ``web/`` (the status page).

May import: ``engine.core``, ``engine.views``, ``engine.kafka``, ``engine.log``,
``engine.cluster`` and itself. Nothing but the CLI and ``engine.whatif`` imports
it.
"""
