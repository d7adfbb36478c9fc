//! Provider configs (`providerconfigs`): per-kind-version worker configuration, one optional
//! default per (kind, version) pushed to every stream serving it, and named overrides that
//! resources attach with `provider_config_ref`. Composer-emitted configs carry an owner and
//! are managed by their root only.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

/// One provider config (without its bundle bytes).
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct ProviderConfigRow {
    /// Global name.
    pub name: String,
    /// The kind it configures.
    pub kind: String,
    /// The kind version it configures.
    pub kind_version: i32,
    /// Whether it is the default of its kind version.
    pub is_default: bool,
    /// The config spec.
    pub spec: serde_json::Value,
    /// Bundle size in bytes (0 = none).
    pub data_size: i64,
    /// The composing root that owns it, if any.
    pub owner_id: Option<Uuid>,
    /// Resources attached to it.
    pub used_by: i64,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "pc.name, pc.kind, pc.kind_version, pc.is_default, pc.spec, \
     coalesce(octet_length(pc.data), 0)::bigint AS data_size, pc.owner_id, \
     (SELECT count(*) FROM resources r WHERE r.provider_config_ref = pc.name) AS used_by, \
     pc.created_at, pc.updated_at";

/// The fields of an upsert.
#[derive(Debug, Clone)]
pub struct ProviderConfigPut<'a> {
    /// Global name.
    pub name: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Kind version.
    pub kind_version: i32,
    /// Default of its kind version.
    pub is_default: bool,
    /// Validated spec.
    pub spec: &'a serde_json::Value,
    /// Decoded bundle.
    pub data: Option<&'a [u8]>,
    /// The stored spec that writeOnly `"***"` placeholders of `spec` were filled from, if
    /// any: the write is refused ([`PutRefused::Changed`]) unless that is still the stored
    /// spec, so a concurrent edit's secret is never overwritten with an older one.
    pub kept_from: Option<&'a serde_json::Value>,
}

/// Why an upsert was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutRefused {
    /// Another config is already the default of that kind version.
    DefaultTaken(String),
    /// The name belongs to a composer-emitted config.
    Owned,
    /// The stored spec is no longer [`ProviderConfigPut::kept_from`].
    Changed,
}

/// Creates or replaces a config by name. `Ok(Ok(created))`, or the reason it was refused.
pub async fn providerconfig_put(
    pool: &PgPool,
    c: &ProviderConfigPut<'_>,
) -> Result<Result<bool, PutRefused>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Serialise writers of one kind version so the default check and the write agree.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('converge.providerconfig'), hashtext($1))")
        .bind(format!("{}/{}", c.kind, c.kind_version))
        .execute(&mut *tx)
        .await?;
    let stored: Option<(Option<Uuid>, serde_json::Value)> =
        sqlx::query_as("SELECT owner_id, spec FROM providerconfigs WHERE name = $1 FOR UPDATE")
            .bind(c.name)
            .fetch_optional(&mut *tx)
            .await?;
    if matches!(stored, Some((Some(_), _))) {
        return Ok(Err(PutRefused::Owned));
    }
    if let Some(kept) = c.kept_from
        && stored.as_ref().map(|(_, spec)| spec) != Some(kept)
    {
        return Ok(Err(PutRefused::Changed));
    }
    if c.is_default {
        let other: Option<String> = sqlx::query_scalar(
            "SELECT name FROM providerconfigs
             WHERE kind = $1 AND kind_version = $2 AND is_default AND name <> $3",
        )
        .bind(c.kind)
        .bind(c.kind_version)
        .bind(c.name)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(other) = other {
            return Ok(Err(PutRefused::DefaultTaken(other)));
        }
    }
    let inserted: bool = sqlx::query_scalar(
        "INSERT INTO providerconfigs AS pc (name, kind, kind_version, is_default, spec, data)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (name) DO UPDATE
             SET kind = EXCLUDED.kind, kind_version = EXCLUDED.kind_version,
                 is_default = EXCLUDED.is_default, spec = EXCLUDED.spec, data = EXCLUDED.data,
                 updated_at = now()
         RETURNING (xmax = 0)",
    )
    .bind(c.name)
    .bind(c.kind)
    .bind(c.kind_version)
    .bind(c.is_default)
    .bind(c.spec)
    .bind(c.data)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Ok(inserted))
}

/// One config with its bundle.
pub async fn providerconfig_get(
    pool: &PgPool,
    name: &str,
) -> Result<Option<(ProviderConfigRow, Option<Vec<u8>>)>, sqlx::Error> {
    let sql = format!("SELECT {COLUMNS}, pc.data FROM providerconfigs pc WHERE pc.name = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(name)
        .fetch_optional(pool)
        .await?;
    row.map(|r| {
        use sqlx::Row;
        Ok((ProviderConfigRow::from_row(&r)?, r.try_get("data")?))
    })
    .transpose()
}

/// List filters (all optional).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Exact kind.
    pub kind: Option<String>,
    /// Name substring.
    pub name: Option<String>,
    /// Only defaults (true) or only overrides (false).
    pub is_default: Option<bool>,
    /// Rows to skip.
    pub offset: i64,
    /// Page size.
    pub limit: i64,
}

/// One offset page of configs ordered by name, and the total matching.
pub async fn providerconfig_list(
    pool: &PgPool,
    f: &ListFilter,
) -> Result<(Vec<ProviderConfigRow>, i64), sqlx::Error> {
    const WHERE: &str = "WHERE ($1::text IS NULL OR pc.kind = $1)
           AND ($2::text IS NULL OR strpos(pc.name, $2) > 0)
           AND ($3::boolean IS NULL OR pc.is_default = $3)";
    let sql = format!(
        "SELECT {COLUMNS} FROM providerconfigs pc {WHERE} ORDER BY pc.name OFFSET $4 LIMIT $5"
    );
    let items = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&f.kind)
        .bind(&f.name)
        .bind(f.is_default)
        .bind(f.offset)
        .bind(f.limit)
        .fetch_all(pool)
        .await?;
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM providerconfigs pc {WHERE}"
    )))
    .bind(&f.kind)
    .bind(&f.name)
    .bind(f.is_default)
    .fetch_one(pool)
    .await?;
    Ok((items, total))
}

/// Why a delete was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Deleted.
    Deleted,
    /// No such config.
    NotFound,
    /// Owned by a composite root (it manages it).
    Owned,
    /// Resources still reference it.
    InUse(i64),
}

/// Deletes a config unless a root owns it or resources still reference it.
pub async fn providerconfig_delete(
    pool: &PgPool,
    name: &str,
) -> Result<DeleteOutcome, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let owner: Option<Option<Uuid>> =
        sqlx::query_scalar("SELECT owner_id FROM providerconfigs WHERE name = $1 FOR UPDATE")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
    match owner {
        None => return Ok(DeleteOutcome::NotFound),
        Some(Some(_)) => return Ok(DeleteOutcome::Owned),
        Some(None) => {}
    }
    let used: i64 =
        sqlx::query_scalar("SELECT count(*) FROM resources WHERE provider_config_ref = $1")
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
    if used > 0 {
        return Ok(DeleteOutcome::InUse(used));
    }
    sqlx::query("DELETE FROM providerconfigs WHERE name = $1")
        .bind(name)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(DeleteOutcome::Deleted)
}

/// The (kind, version) a config configures and its spec, for checking a resource's reference.
pub async fn providerconfig_target(
    pool: &PgPool,
    name: &str,
) -> Result<Option<(String, i32, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as("SELECT kind, kind_version, spec FROM providerconfigs WHERE name = $1")
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// The API-managed configs of (kind, version) that would act as a resource's override and
/// set one of `fields` at the top of their spec (every non-default config, and a default one
/// a resource names in `provider_config_ref`), with the fields each sets; at most 20, by
/// name. Composer-emitted configs are left out: the API cannot change them.
pub async fn override_offenders(
    pool: &PgPool,
    kind: &str,
    kind_version: i32,
    fields: &[&str],
) -> Result<Vec<(String, Vec<String>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT pc.name, array(SELECT f FROM unnest($3::text[]) f WHERE pc.spec ? f)
         FROM providerconfigs pc
         WHERE pc.kind = $1 AND pc.kind_version = $2 AND pc.owner_id IS NULL
           AND pc.spec ?| $3::text[]
           AND (NOT pc.is_default
                OR EXISTS (SELECT 1 FROM resources r WHERE r.provider_config_ref = pc.name))
         ORDER BY pc.name LIMIT 20",
    )
    .bind(kind)
    .bind(kind_version)
    .bind(fields)
    .fetch_all(pool)
    .await
}

/// One config as `converge secrets rotate` reads it: name, kind, kind version, stored spec.
pub type StoredSpec = (String, String, i32, serde_json::Value);

/// Up to `limit` configs whose names sort after `after`, by name (keyset pages: a rotation
/// reads every config once however many it rewrites meanwhile).
pub async fn specs_after(
    pool: &PgPool,
    after: &str,
    limit: i64,
) -> Result<Vec<StoredSpec>, sqlx::Error> {
    sqlx::query_as(
        "SELECT name, kind, kind_version, spec FROM providerconfigs
         WHERE name > $1 ORDER BY name LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// One config's stored spec (`None`: it is gone).
pub async fn spec_of(pool: &PgPool, name: &str) -> Result<Option<StoredSpec>, sqlx::Error> {
    sqlx::query_as("SELECT name, kind, kind_version, spec FROM providerconfigs WHERE name = $1")
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Replaces the spec of config `name` with `new` if it is still `old` (a rotation never
/// overwrites a write made since it read the config); whether it did. `updated_at` stays:
/// the config says what it said.
pub async fn replace_spec(
    pool: &PgPool,
    name: &str,
    old: &serde_json::Value,
    new: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query("UPDATE providerconfigs SET spec = $3 WHERE name = $1 AND spec = $2")
        .bind(name)
        .bind(old)
        .bind(new)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// The stored specs of the configs `owner` (a composite) owns among `names`, as
/// (name, kind, spec): what a compose's configs are compared with before they are written.
pub async fn owned_specs(
    pool: &PgPool,
    owner: Uuid,
    names: &[String],
) -> Result<Vec<(String, String, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT name, kind, spec FROM providerconfigs WHERE owner_id = $1 AND name = ANY($2)",
    )
    .bind(owner)
    .bind(names)
    .fetch_all(pool)
    .await
}
