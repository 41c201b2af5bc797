"""The pure core: every rule kreassign decides by. No I/O, no clock, no Kafka.

Read top-down: values (``partition``, ``units``, ``limits``) -> the KIP-435 step
planner (``step``) -> the batch scheduler (``scheduler``) -> KIP-73 throttles
(``throttles``) -> KIP-236 cancellation (``cancellation``) -> the inputs
(``commands``: operator commands, observations, the outcome of every action),
what the engine asks of a cluster (``actions``) and what a cluster answers
(``outcomes``: ok, refused with Kafka's error, unavailable) -> ``retry`` (the one
place that decides retries) -> ``events`` -> ``decide(state, input) -> events`` and
``state.apply(state, event) -> state``. Also here: ``validation`` (what makes a
submission invalid), ``reassignment_json`` (Kafka's reassignment JSON),
``adaptive`` (the opt-in adaptive throttle), ``cluster_snapshot`` (a whole cluster
at one moment, for planners) and ``balancer`` (KAFKA-5319).

May import: the standard library's pure modules, ``immutables``, and itself.
Nothing else of kreassign, no client library, no clock, no file, no socket.
Time reaches the core only as a value inside an input.
"""
