"""Pure read models of the core's state: what operators and machines are shown.

``summary`` (requests, partitions per status, waits, problems), ``attention``
(what needs an operator now), ``brokers`` (what waits on a broker that does not
answer, or is down), ``progress`` (bytes and time per request: a fold
over the same events), ``verdict`` (the engine's answer to one command, from
the events it appended) and ``tables`` (the rows ``/tables`` serves).

May import: ``engine.core`` and itself. No I/O: ``status``, the status page,
``/metrics`` and the CLI's verdicts all render these values.
"""
