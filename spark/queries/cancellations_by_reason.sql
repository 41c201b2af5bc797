-- Cancellations, skipped cancellations and rejected commands, by reason.
SELECT kind, reason, sum(n) AS times, min(minute) AS first_minute, max(minute) AS last_minute
FROM cancellations_per_minute
GROUP BY kind, reason
ORDER BY times DESC, kind, reason
