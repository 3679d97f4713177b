-- What `nsys stats --report cuda_gpu_kern_sum` computes: kernel time by name.
SELECT sum(k.end - k.start) AS total, count(*) AS instances, avg(k.end - k.start) AS average,
       min(k.end - k.start) AS minimum, max(k.end - k.start) AS maximum, s.value AS name
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN StringIds AS s ON s.id = k.demangledName
GROUP BY k.demangledName
ORDER BY total DESC;
