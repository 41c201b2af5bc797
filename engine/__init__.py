"""kreassign: event-sourced partition reassignment for Apache Kafka.

Read top-down: values (partition, limits) -> step planner (KIP-435, ``step``)
-> batch scheduler (``scheduler``) -> throttles (KIP-73, ``throttles``) ->
cancellation (KIP-236, ``cancellation``) -> commands/events -> ``decide`` /
``state.apply``. Everything in those modules is pure: no I/O, no clock, no
Kafka. Adapters, the stream engine and the CLI are thin shells around them.
"""

__version__ = "0.1.0"
