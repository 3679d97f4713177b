-- What `nsys stats --report nvtx_sum` computes: push/pop and start/end range time by text.
SELECT sum(n.end - n.start) AS total, count(*) AS instances, avg(n.end - n.start) AS average,
       min(n.end - n.start) AS minimum, max(n.end - n.start) AS maximum,
       CASE n.eventType WHEN 59 THEN 'PushPop' ELSE 'StartEnd' END AS style,
       coalesce(n.text, s.value) AS name
FROM NVTX_EVENTS AS n
LEFT JOIN StringIds AS s ON s.id = n.textId
WHERE n.eventType IN (59, 60)
GROUP BY coalesce(n.text, s.value), n.eventType
ORDER BY total DESC;
