-- The problems-first order of the resource lists (issue 45): `?sort=problems` lists the
-- resources that need a person (Failed, Quarantined, Degraded, Orphaned) before the others,
-- as one keyset walk over pages, at a million rows.
--
-- A problem is rare and its phase changes rarely; a reconcile's phase change (Reconciling ->
-- Ready) is the hot path. So the order is not an index on `resources`: any index naming
-- `phase` would make every reconcile's update of that row a non-HOT update (a new entry in
-- every index). It is this side table of the problem rows only, kept by row triggers whose
-- WHEN clause lets every other phase change pass without a call (engine/sql/problems.sql,
-- which also defines the ranks and fills the table). The rest of a list is walked in
-- creation order through idx_resources_created, skipping problems by their stored phase.
CREATE TABLE resource_problems (
    id         uuid        PRIMARY KEY,
    -- resource_problem_rank(phase): lower is listed first.
    rank       smallint    NOT NULL,
    -- The resource's created_at (it never changes): the order within a rank.
    created_at timestamptz NOT NULL
);
CREATE INDEX resource_problems_order ON resource_problems (rank, created_at, id);
