//! Dry-run composes for plans (`plan_requests`, migration 0007): how
//! `POST /api/v1/resources:plan` asks the worker serving a composite's composer (an SDK,
//! WASM) what it would compose, when the API and the brokers are different processes.
//!
//! The API inserts a request ([`request`], NOTIFY `plan_requested`); a broker with a ready
//! worker that declared dry-run support for the kind claims it ([`claim`], `FOR UPDATE SKIP
//! LOCKED`, only before its deadline), sends that worker a compose task with
//! `StageTask.dry_run` set and writes the checked answer back ([`answer`], NOTIFY
//! `plan_answered` with the row's id); the API takes the answer, deleting the row
//! ([`take`]), or gives up at its deadline ([`forget`]). Stale rows are swept ([`sweep`]).
//! Every statement here touches `plan_requests` alone: a dry run cannot change a resource,
//! an edge, an event, a queue row or the outbox.

use std::time::Duration;

use serde_json::Value;
use sqlx::{FromRow, PgPool, Result};
use uuid::Uuid;

use super::interval;
use crate::ids::KindPair;

/// The NOTIFY channel of a new request (payload: its kind).
pub const REQUESTED: &str = "plan_requested";
/// The NOTIFY channel of an answer (payload: the request's id).
pub const ANSWERED: &str = "plan_answered";

/// How long past its deadline an abandoned row stays before [`sweep`] removes it.
pub const SWEEP_AFTER: Duration = Duration::from_secs(60);

/// What the API asks: compose `spec` as the composite (kind, version, name) would get it.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The request's id (the API's, random).
    pub id: Uuid,
    /// The composite's kind.
    pub kind: &'a str,
    /// Its kind version.
    pub kind_version: i32,
    /// Its name.
    pub name: &'a str,
    /// The stored composite, for a plan of an update (its children are the observed ones).
    pub resource_id: Option<Uuid>,
    /// The spec an apply would store.
    pub spec: &'a Value,
    /// The labels an apply would store.
    pub labels: &'a Value,
    /// The provider config the document names, if any.
    pub provider_config_ref: Option<&'a str>,
    /// How long the API waits.
    pub wait: Duration,
}

/// Inserts `r` and tells the brokers (NOTIFY `plan_requested`), in one statement.
pub async fn request(pool: &PgPool, r: &PlanRequest<'_>) -> Result<()> {
    sqlx::query(
        "WITH ins AS (
             INSERT INTO plan_requests
                 (id, kind, kind_version, name, resource_id, spec, labels, provider_config_ref,
                  deadline)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + $9)
             RETURNING kind)
         SELECT pg_notify('plan_requested', kind) FROM ins",
    )
    .bind(r.id)
    .bind(r.kind)
    .bind(r.kind_version)
    .bind(r.name)
    .bind(r.resource_id)
    .bind(r.spec)
    .bind(r.labels)
    .bind(r.provider_config_ref)
    .bind(interval(r.wait))
    .execute(pool)
    .await?;
    Ok(())
}

/// A request a broker claimed, with what the compose task needs of the stored rows.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedPlan {
    /// The request's id.
    pub id: Uuid,
    /// The composite's kind.
    pub kind: String,
    /// Its kind version.
    pub kind_version: i32,
    /// Its name.
    pub name: String,
    /// The stored composite, for an update.
    pub resource_id: Option<Uuid>,
    /// The planned spec.
    pub spec: Value,
    /// The planned labels.
    pub labels: Value,
    /// The stored composite's generation (0 for a create).
    pub generation: i64,
    /// The stored composite's status, if any.
    pub status: Option<Value>,
    /// The named provider config's spec (sealed values still sealed), if it exists.
    pub config_spec: Option<Value>,
    /// The named provider config's bundle, if any.
    pub config_data: Option<Vec<u8>>,
    /// Time left before the API stops waiting.
    pub left_ms: i64,
}

/// Claims at most `limit` unanswered requests of `pairs` whose deadline has not passed, for
/// broker `broker`. Rows another broker is claiming are skipped, not waited for.
pub async fn claim(
    pool: &PgPool,
    broker: &str,
    pairs: &[KindPair],
    limit: i64,
) -> Result<Vec<ClaimedPlan>> {
    let kinds: Vec<&str> = pairs.iter().map(|p| p.kind.as_str()).collect();
    let versions: Vec<i32> = pairs.iter().map(|p| p.version).collect();
    sqlx::query_as(
        "WITH c AS (
             UPDATE plan_requests p SET claimed_by = $1, claimed_at = now()
             WHERE p.id IN (
                 SELECT q.id FROM plan_requests q
                 JOIN unnest($2::text[], $3::int[]) AS w(kind, kind_version)
                   ON w.kind = q.kind AND w.kind_version = q.kind_version
                 WHERE q.claimed_by IS NULL AND q.deadline > now()
                 ORDER BY q.created_at
                 LIMIT $4
                 FOR UPDATE OF q SKIP LOCKED)
             RETURNING p.*)
         SELECT c.id, c.kind, c.kind_version, c.name, c.resource_id, c.spec, c.labels,
                coalesce(r.generation, 0) AS generation, r.status,
                pc.spec AS config_spec, pc.data AS config_data,
                greatest(1, (extract(epoch FROM c.deadline - now()) * 1000)::bigint) AS left_ms
         FROM c
         LEFT JOIN resources r ON r.id = c.resource_id
         LEFT JOIN providerconfigs pc ON pc.name = c.provider_config_ref",
    )
    .bind(broker)
    .bind(&kinds)
    .bind(&versions)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// A dry run's outcome, as the broker writes it and the API reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanAnswer {
    /// The checked compose output: `{children, edges, status?}` (the shape of the
    /// composers' `ComposeOutput`).
    Composed(Value),
    /// The compose would fail: the composer's error, or the broker's refusal of its output.
    Failed(String),
    /// No composer ran (its worker left or did not answer in time): nothing is known.
    NotRun(String),
}

/// Writes the answer of request `id`, claimed by `broker`, and NOTIFYs `plan_answered`;
/// false if the row is gone (the API gave up) or was not this broker's to answer.
pub async fn answer(pool: &PgPool, id: Uuid, broker: &str, a: &PlanAnswer) -> Result<bool> {
    let (result, error, not_run) = match a {
        PlanAnswer::Composed(v) => (Some(v), None, false),
        PlanAnswer::Failed(e) => (None, Some(e.as_str()), false),
        PlanAnswer::NotRun(e) => (None, Some(e.as_str()), true),
    };
    let n: Option<bool> = sqlx::query_scalar(
        "WITH u AS (
             UPDATE plan_requests
             SET answered_at = now(), result = $3, error = $4, not_run = $5
             WHERE id = $1 AND claimed_by = $2 AND answered_at IS NULL
             RETURNING id)
         SELECT pg_notify('plan_answered', id::text) IS NOT NULL FROM u",
    )
    .bind(id)
    .bind(broker)
    .bind(result)
    .bind(error)
    .bind(not_run)
    .fetch_optional(pool)
    .await?;
    Ok(n.is_some())
}

/// Takes the answer of request `id` (deleting the row) if there is one.
pub async fn take(pool: &PgPool, id: Uuid) -> Result<Option<PlanAnswer>> {
    let row: Option<(Option<Value>, Option<String>, bool)> = sqlx::query_as(
        "DELETE FROM plan_requests WHERE id = $1 AND answered_at IS NOT NULL
         RETURNING result, error, not_run",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(result, error, not_run)| match (result, error) {
        (Some(v), _) => PlanAnswer::Composed(v),
        (None, e) if not_run => PlanAnswer::NotRun(e.unwrap_or_default()),
        (None, e) => PlanAnswer::Failed(e.unwrap_or_default()),
    }))
}

/// Whether request `id` was claimed by a broker (for the API's message when none answers).
pub async fn claimed(pool: &PgPool, id: Uuid) -> Result<bool> {
    sqlx::query_scalar("SELECT claimed_by IS NOT NULL FROM plan_requests WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map(|c: Option<bool>| c.unwrap_or(false))
}

/// Deletes request `id` (the API stopped waiting).
pub async fn forget(pool: &PgPool, id: Uuid) -> Result<()> {
    sqlx::query("DELETE FROM plan_requests WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Deletes the rows abandoned more than [`SWEEP_AFTER`] ago (an API process that died while
/// waiting); returns how many.
pub async fn sweep(pool: &PgPool) -> Result<u64> {
    sqlx::query("DELETE FROM plan_requests WHERE deadline < now() - $1")
        .bind(interval(SWEEP_AFTER))
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
}
