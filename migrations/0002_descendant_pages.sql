-- A rollup handler pages through a root's live subtree with ListDescendants in id order
-- (keyset: `root_id = $1 AND id > $2 ORDER BY id`). The root_id index alone left every page
-- sorting the whole subtree; with (root_id, id) a page is one index range. It replaces the
-- old index, which served only `root_id = $1`, so the write path keeps the same index count.
CREATE INDEX idx_resources_root_id ON resources (root_id, id) WHERE root_id IS NOT NULL;
DROP INDEX idx_resources_root;
