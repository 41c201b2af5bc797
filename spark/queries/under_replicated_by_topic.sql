-- Time partitions spent under-replicated (fewer in-sync replicas than replicas - adding), per topic.
SELECT topic, count(*) AS spans, sum(duration_seconds) AS seconds, max(duration_seconds) AS longest_seconds
FROM under_replicated
GROUP BY topic
ORDER BY seconds DESC, topic
