-- converge: schedule_eligible probes resources by key without building bitmaps. Forward-only.
--
-- With sequential scans off (0014) the planner answered the gate's per-candidate lookups
-- (its upstreams in resource_deps, each upstream's row) with a bitmap index scan plus a bitmap
-- heap scan per candidate: a bitmap built and torn down for one or two rows, in a loop over
-- every candidate (1,000 per compose of a 1,000-child root, one per drained result).
-- Plain index probes do the same lookups without the bitmap.

ALTER FUNCTION schedule_eligible(uuid[]) SET enable_seqscan = off SET enable_bitmapscan = off;
