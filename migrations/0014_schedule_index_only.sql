-- converge: schedule_eligible probes resources by primary key, whatever the table's size was
-- when the plan was made. Forward-only.
--
-- 0011 gave schedule_eligible a forced generic plan, made once per connection on its first
-- call. On a fresh database that first call sees a nearly empty resources table, so the one
-- plan a connection keeps is a sequential scan filtered by `id = ANY (ids)`; it stays cached
-- until autovacuum next analyses the table (a minute or more). auto_explain on a 20,000-leaf
-- run showed every apply scanning the whole table (7 ms per apply at 5,000 rows, 20 ms at
-- 20,000: applies/s fell as the table grew) and the drain's cascade spending 60–100 ms per
-- batch in the same scan. Every statement in this function is a key lookup, so sequential
-- scans are turned off for it: the plan is the primary-key probe at any table size.
--
-- A disabled scan is not forbidden, only priced far above any real plan; where a statement
-- has no other path that price would exceed jit_above_cost and PostgreSQL would spend
-- hundreds of milliseconds JIT-compiling a lookup of a few rows (measured on a compose with
-- sequential scans off). JIT is off here too: nothing in the gate is big enough to gain.

ALTER FUNCTION schedule_eligible(uuid[]) SET enable_seqscan = off SET jit = off;
