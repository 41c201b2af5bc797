-- Bytes each broker received (new replicas) and sent (as the step's source), over the whole log.
SELECT broker, sum(bytes_in) AS bytes_in, sum(bytes_out) AS bytes_out
FROM bytes_per_broker_minute
GROUP BY broker
ORDER BY bytes_in + bytes_out DESC, broker
