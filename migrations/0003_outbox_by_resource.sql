-- A plain leaf's reconcile result is applied in the statement that fences it (work_complete)
-- instead of passing through work_outbox, but only when no earlier result of the same
-- resource still waits there: applied first, the newer result would be overwritten by the
-- older one when the drainer got to it. This index makes that check one probe a result.
CREATE INDEX idx_work_outbox_resource ON work_outbox (resource_id);
