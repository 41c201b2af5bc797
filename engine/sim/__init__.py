"""The simulated cluster: a model of Kafka's reassignment physics and KRaft's controller.

``scenario`` reads scenario files; ``model`` holds the simulated cluster's
state; ``controller`` applies the controller's rules to it; ``physics``
advances it in time; ``cluster`` offers it through the ``engine.cluster``
interface; ``server`` serves it as its own process (HTTP, ``wire`` its JSON
forms) and ``kafka_front`` / ``kafka_api`` / ``kafka_configs`` / ``security``
speak the Kafka protocol for it; ``probe`` is its acks=all producer; ``bound``
the physical lower bound of a move.

May import: ``engine.core`` and itself. The core never imports the simulated
cluster; the adapters (``engine.cluster``) open it, ``engine.whatif`` drives it.
"""
