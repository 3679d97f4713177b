-- What `nsys stats --report cuda_api_sum` computes: CUDA API time by function.
SELECT sum(r.end - r.start) AS total, count(*) AS instances, avg(r.end - r.start) AS average,
       min(r.end - r.start) AS minimum, max(r.end - r.start) AS maximum, s.value AS name
FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
JOIN StringIds AS s ON s.id = r.nameId
GROUP BY r.nameId
ORDER BY total DESC;
