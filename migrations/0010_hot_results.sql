-- A reconcile's result update made HOT, and the event log's time index made cheap to append
-- to (issue 44).
--
-- resources at fillfactor 50: a claim and a completion batch take resources in id order, and
-- ids are time-ordered (uuid_v7), so one batch updates most rows of a page at once. At 85 a
-- page had room for about one new version in six of its rows, and 53-60 % of the result
-- updates were not HOT: each wrote new entries into every index of the row (the key, (kind,
-- name), the created-at pages) and made the btrees' bottom-up deletion pass clean up after
-- it. At 50 a page holds as many free slots as rows. The setting applies to pages written
-- from now on: an existing table keeps its packed pages until it is rewritten (VACUUM FULL or
-- pg_repack), which this migration does not do, to keep the upgrade a catalog change.
--
-- resource_events' `at` index becomes BRIN: event ids and times grow together, so a BRIN
-- summary of block ranges serves the GC's `at < cutoff` (gc_resource_events) at the cost of
-- an append, where the btree took an index insert for every event (3 indexes a row, the
-- phase change of every reconcile).
ALTER TABLE resources SET (fillfactor = 50);
DROP INDEX idx_resource_events_at;
CREATE INDEX idx_resource_events_at ON resource_events USING brin (at);
