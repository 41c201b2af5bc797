"""kreassign analytics: the events topic as Spark tables (issue 7).

Pure parts (no Spark): ``spark.audit`` (one event -> one audit row, decoding
with the project's codec), ``spark.lifecycle`` (one partition's events -> its
steps and under-replicated spans, bytes attributed to brokers). Spark shells:
``spark.kafka_source`` (a Python streaming data source over the events
topic), ``spark.audit_job`` (the streaming queries; ``spark-submit
spark/audit_job.py``), ``spark.warehouse`` (tables and views for SQL),
``spark.report`` (HTML + PNG). docs/analytics.md describes the tables.
"""
