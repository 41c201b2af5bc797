"""The Kafka edge: how kreassign's clients connect and what they may do.

``client_config`` (a Java client properties file, ``--command-config``),
``broker_profile`` (settings that depend on the broker: Apache Kafka or the
embedded one), ``embedded`` (tansu and every accommodation it needs), ``access``
(Kafka's authentication and authorization failures, named), ``acls`` (the grants
each principal needs, with reasons), ``probe`` (asking Kafka what this client
may do), ``preflight`` (the engine's start-up check) and ``topics`` (kreassign's
topics, groups and transactional id: names, layout, creation).

May import: itself only. The event log, the adapters and the running engine
build on it.
"""
