-- Cluster-wide throughput per minute: steps started and completed, bytes moved, the throttle in force.
SELECT s.minute, s.planned, s.completed, coalesce(b.bytes_in, 0) AS bytes_moved, t.rate AS throttle_rate_set
FROM steps_per_minute s
LEFT JOIN (SELECT minute, sum(bytes_in) AS bytes_in FROM bytes_per_broker_minute GROUP BY minute) b USING (minute)
LEFT JOIN throttle_per_minute t USING (minute)
ORDER BY s.minute
