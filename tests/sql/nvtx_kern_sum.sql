-- What `nsys stats --report nvtx_kern_sum` computes: for each push/pop range and kernel,
-- the kernels launched while the range was open on the launching thread.
SELECT coalesce(n.text, ns.value) AS range, kn.value AS kernel, count(*) AS instances,
       sum(k.end - k.start) AS total, min(k.end - k.start) AS minimum, max(k.end - k.start) AS maximum
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
  ON r.correlationId = k.correlationId AND k.globalPid = (r.globalTid & ~0xFFFFFF)
JOIN NVTX_EVENTS AS n
  ON n.eventType = 59 AND n.globalTid = r.globalTid AND n.start <= r.start AND n.end >= r.end
LEFT JOIN StringIds AS ns ON ns.id = n.textId
JOIN StringIds AS kn ON kn.id = k.demangledName
GROUP BY range, kernel
ORDER BY range, total DESC;
