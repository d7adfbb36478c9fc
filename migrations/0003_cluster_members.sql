-- Who is here: every converge process (ROLE all, control or broker) keeps one row while it
-- runs, stamped about once a second and deleted when it stops; a row silent for the dead-after
-- window is deleted by any other member, which in the same transaction releases the queue
-- leases and reactor deliveries stamped with its id (a broker's id is its member id). A
-- broker also writes the workers connected to it, as a JSON array, when one connects or leaves
-- and with its heartbeat (at most every few seconds while only their in-flight counts move),
-- so a control process on another host can list them and count who serves each kind version.
--
-- This table takes over broker_liveness. That table is left in place, unread and unwritten by
-- this release, for the brokers of the previous release that still run during a rolling
-- upgrade (they stamp it and release each other's leases through it); a later migration
-- drops it.
CREATE TABLE cluster_members (
    member_id    text        PRIMARY KEY,
    role         text        NOT NULL CHECK (role IN ('all', 'control', 'broker')),
    version      text        NOT NULL,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    -- The listeners' addresses by name (http, grpc, health).
    addresses    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    -- Brokers only: the connected workers (name, sdk, kinds, max_inflight, inflight, since).
    workers      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    workers_at   timestamptz
);
