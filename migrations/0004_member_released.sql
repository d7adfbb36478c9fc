-- The cluster view keeps the dead visible (issue 43). A member silent for the liveness window
-- (MEMBER_DEAD_AFTER) is no longer deleted at once: another member stamps its released_at and,
-- in the same transaction, releases its leases (once). The row stays, listed NotReady by
-- GET /api/v1/cluster and ignored by every routing read (those count only rows stamped within
-- the window), until a longer TTL (MEMBER_GC_AFTER) after its last stamp removes it. A member
-- that stamps again (a paused process waking up) clears released_at.
ALTER TABLE cluster_members ADD COLUMN released_at timestamptz;
