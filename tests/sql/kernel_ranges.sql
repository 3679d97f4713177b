-- Kernels renamed by the NVTX range they were launched in: the innermost push/pop range
-- open on the launching thread around the launching call (nsys's "rename kernels with
-- NVTX"), with each kernel's time.
SELECT k.correlationId AS correlationId, kn.value AS kernel, k.end - k.start AS duration,
       (SELECT coalesce(n.text, ns.value)
        FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS ns ON ns.id = n.textId
        WHERE n.eventType = 59 AND n.globalTid = r.globalTid
          AND n.start <= r.start AND n.end >= r.end
        ORDER BY n.start DESC LIMIT 1) AS range
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
  ON r.correlationId = k.correlationId AND k.globalPid = (r.globalTid & ~0xFFFFFF)
JOIN StringIds AS kn ON kn.id = k.shortName
ORDER BY k.start;
