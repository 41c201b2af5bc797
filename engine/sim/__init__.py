"""The simulated cluster: a model of Kafka's reassignment physics and controller.

``scenario`` reads scenario files; ``model`` holds the simulated cluster's
state; ``controller`` applies Kafka's controller rules to it; ``physics``
advances it in time; ``cluster`` wraps it behind the ``engine.cluster``
interface; ``server`` serves it as its own process; ``strategies`` and
``report`` drive and measure ``kreassign simulate``.
"""
