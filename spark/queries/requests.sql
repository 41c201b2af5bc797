-- Every request: what it moved, how long it took, how it ended.
SELECT request_id, partitions, accepted_at, completed_at, makespan_seconds, steps_completed, steps_aborted,
       partitions_completed, partitions_cancelled, partitions_reverted, rejections, bytes_moved
FROM requests
ORDER BY accepted_at
