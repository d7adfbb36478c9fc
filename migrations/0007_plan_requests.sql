-- Dry-run composes for plans (issue 45 item 2): `POST /api/v1/resources:plan` asks the worker
-- that serves a composite's composer (an SDK, WASM) what it would compose for a new spec,
-- without storing anything. The API process and the brokers may be different processes, so
-- the question travels through this table: the API inserts a row and NOTIFYs
-- `plan_requested`; a broker with a connected worker that declared dry-run support
-- (Subscribe.dry_runs) for the kind claims it (SKIP LOCKED), sends that worker a compose task
-- with StageTask.dry_run set, checks its answer as it checks any compose result, and writes
-- the answer (the compose output, or why there is none) back to the row, then NOTIFYs
-- `plan_answered`. The API reads the answer and deletes the row. Nothing else is written:
-- the answer never reaches resources, resource_deps, events, work_queue or work_outbox.
-- Rows whose API gave up (a minute past `deadline`) are swept by the next plan of any API
-- process and by every broker's dry-run loop, once a minute.
CREATE TABLE plan_requests (
    id                  uuid PRIMARY KEY,
    kind                text NOT NULL,
    kind_version        integer NOT NULL CHECK (kind_version BETWEEN 1 AND 32767),
    name                text NOT NULL,
    -- The stored composite, when the plan is of an update (its children are the observed).
    resource_id         uuid,
    spec                jsonb NOT NULL,
    labels              jsonb NOT NULL DEFAULT '{}'::jsonb,
    provider_config_ref text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- When the API stops waiting: no broker claims the row after it.
    deadline            timestamptz NOT NULL,
    -- The broker that claimed it, and when.
    claimed_by          text,
    claimed_at          timestamptz,
    answered_at         timestamptz,
    -- With an answer: the compose output ({children, edges, status}) or `error`: the
    -- composer's failure or the refusal of its output (`not_run` false), or why no composer
    -- ran (`not_run`: its worker left, timed out).
    result              jsonb,
    error               text,
    not_run             boolean NOT NULL DEFAULT false,
    CHECK (answered_at IS NULL OR (result IS NULL) <> (error IS NULL))
);

-- What a broker claims: unclaimed rows of the pairs its dry-run workers serve.
CREATE INDEX plan_requests_unclaimed ON plan_requests (kind, kind_version, created_at)
    WHERE claimed_by IS NULL;
