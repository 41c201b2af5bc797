-- The twenty slowest completed steps that copied data: where did time go?
SELECT request_id, topic, partition, step_number, planned, ended, duration_seconds,
       source_broker, new_replicas, bytes_moved
FROM steps
WHERE outcome = 'completed' AND size(new_replicas) > 0
ORDER BY duration_seconds DESC, topic, partition, step_number
LIMIT 20
