-- Who did it: resource_events.actor names the principal of the API call whose transaction
-- wrote the event (issue 23). The API sets `converge.actor` transaction-locally before a
-- mutating call (control/src/db/mod.rs, `acting`), and every event insert — the triggers'
-- included — picks it up through the column default, so no engine function changes.
-- NULL means the engine itself (drainer, reaper, a worker's result) or an API without
-- AUTH_FILE. `current_setting` is STABLE, so adding the column rewrites nothing: old rows
-- read NULL.
ALTER TABLE resource_events
    ADD COLUMN actor text DEFAULT NULLIF(current_setting('converge.actor', true), '');
