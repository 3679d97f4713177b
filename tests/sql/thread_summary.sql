-- Per thread: its name, and what it recorded (NVTX ranges, CUDA API calls and their time).
SELECT (t.globalTid >> 24) & 0xFFFFFF AS pid, t.globalTid & 0xFFFFFF AS tid, s.value AS thread,
       (SELECT count(*) FROM NVTX_EVENTS AS n WHERE n.globalTid = t.globalTid AND n.eventType IN (59, 60)) AS ranges,
       (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r WHERE r.globalTid = t.globalTid) AS apiCalls,
       (SELECT coalesce(sum(r.end - r.start), 0) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
        WHERE r.globalTid = t.globalTid) AS apiTime
FROM ThreadNames AS t
JOIN StringIds AS s ON s.id = t.nameId
ORDER BY pid, tid;
