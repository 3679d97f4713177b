-- Each kernel with the CUDA API call that launched it (nsys's "correlate kernel launches
-- with the CUDA API calls"): correlationId within a process, the process's globalPid
-- being the call's globalTid with its thread bits cleared.
SELECT k.start AS kernelStart, k.end AS kernelEnd, r.start AS apiStart, r.end AS apiEnd,
       kn.value AS kernel, an.value AS api, k.correlationId AS correlationId,
       (r.globalTid >> 24) & 0xFFFFFF AS pid, r.globalTid & 0xFFFFFF AS tid
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
  ON r.correlationId = k.correlationId AND k.globalPid = (r.globalTid & ~0xFFFFFF)
JOIN StringIds AS kn ON kn.id = k.shortName
JOIN StringIds AS an ON an.id = r.nameId
ORDER BY k.start;
