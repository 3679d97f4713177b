-- torch's ops by name: calls, total and self time (an op's time less its child ops').
SELECT s.value AS name, count(*) AS calls, sum(o.end - o.start) AS total,
       sum(o.end - o.start) - coalesce(sum(c.childTime), 0) AS self
FROM TORCH_OPS AS o
JOIN StringIds AS s ON s.id = o.nameId
LEFT JOIN (SELECT parentId, sum(end - start) AS childTime FROM TORCH_OPS
           WHERE parentId IS NOT NULL GROUP BY parentId) AS c ON c.parentId = o.id
GROUP BY o.nameId
ORDER BY self DESC;
