-- spec_versions loses its foreign key to resources (issue 44): the history is written only by
-- the triggers on `resources` (engine/sql/api.sql), so a version cannot name a resource that
-- is not there, and the key's per-row work was a cost on the hot paths. Each created root
-- paid a `SELECT ... FOR KEY SHARE` probe of its own new row (100,000 of them in a 100k bulk
-- apply, the one per-row statement left in it), and each deleted resource, root or child, an
-- RI cascade query of its own. A statement trigger on `resources` now removes the history
-- of a statement's deleted rows in one DELETE (engine/sql/api.sql,
-- spec_versions_forget_deleted).
ALTER TABLE spec_versions DROP CONSTRAINT spec_versions_resource_id_fkey;
