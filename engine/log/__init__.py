"""The event log on Kafka: the source of truth, its encoding and its readers.

``avro_mapping`` and ``codec`` (Avro single-object encoding of commands and
events, or Schema Registry framing), ``envelope`` (what each message carries),
``eventlog`` (the publisher, the decider's transactional writer, reading a
topic to its end), ``snapshot`` (what a snapshot of the fold holds, canonically
encoded) and ``snapshot_store`` (the snapshots topic), ``replay`` (the fold of
the log, from the latest snapshot), ``signing`` (optional command signatures),
``dead_letter`` (messages that cannot be read, set aside).

May import: ``engine.core``, ``engine.views`` (the snapshot holds the progress
fold), ``engine.kafka`` and itself.
"""
