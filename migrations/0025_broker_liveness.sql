-- Broker liveness (issue 24): a dead broker's leases come back within seconds instead of
-- after the 30 s lease staleness. Every broker stamps its row about once a second
-- (broker/src/liveness.rs); any broker that finds a row older than the dead-after window
-- deletes it and releases the leases stamped with that broker_id (work_queue.broker_id is
-- set by work_claim and, for resumed tasks, by the adopting broker). A broker that stops
-- cleanly releases its leases and deletes its own row.
CREATE TABLE broker_liveness (
    broker_id    text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
