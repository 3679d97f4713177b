-- torch's ops by name as torch's table counts them: calls, total and self time (an op's
-- time less its child ops'). An op that is the only child of an op of its own name
-- (aten::bitwise_and calling aten::bitwise_and) is one call with it, as torch's
-- EventList._remove_dup_nodes makes it: it adds no call and no total, and its self time
-- stays in the row.
WITH kids AS (
  SELECT parentId AS id, count(*) AS n, sum(end - start) AS ns
  FROM TORCH_OPS WHERE parentId IS NOT NULL GROUP BY parentId),
ops AS (
  SELECT o.nameId, o.end - o.start AS dur, o.end - o.start - coalesce(k.ns, 0) AS self,
         coalesce(pk.n = 1 AND p.nameId = o.nameId, 0) AS folded
  FROM TORCH_OPS AS o
  LEFT JOIN kids AS k ON k.id = o.id
  LEFT JOIN TORCH_OPS AS p ON p.id = o.parentId
  LEFT JOIN kids AS pk ON pk.id = o.parentId)
SELECT s.value AS name, sum(1 - folded) AS calls, sum(CASE WHEN folded THEN 0 ELSE dur END) AS total,
       sum(self) AS self
FROM ops JOIN StringIds AS s ON s.id = ops.nameId
GROUP BY ops.nameId
ORDER BY self DESC;
