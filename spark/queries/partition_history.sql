-- The full history of the partition with the most steps, event by event, from the audit table.
WITH busiest AS (
  SELECT topic, partition FROM steps GROUP BY topic, partition
  ORDER BY count(*) DESC, topic, partition LIMIT 1)
SELECT a.kafka_offset, a.recorded_at, a.event_type, a.request_id, a.step_number, a.reason
FROM audit a JOIN busiest b ON a.topic = b.topic AND a.partition = b.partition
ORDER BY a.kafka_offset
