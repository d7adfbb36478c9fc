//! kind_manifest, kind_config and default provider config SQL: what the API writes and what
//! the broker's and control's manifest caches read.

use sqlx::{PgPool, Row};

use crate::{ids::KindPair, words::ApplyResult};

/// A stored manifest.
#[derive(Debug, Clone)]
pub struct StoredManifest {
    /// The (kind, version) it describes.
    pub pair: KindPair,
    /// The manifest document.
    pub manifest: serde_json::Value,
    /// Its content hash.
    pub manifest_version: i64,
}

/// Stores `manifest` for (kind, version) and says what that did: a new (kind, version) is
/// `Created`, a changed manifest `Configured`; an identical document writes nothing
/// (`Unchanged`). The database re-checks legality (`validate_kind_manifest`) and seeds
/// kind_config.
pub async fn manifest_put(
    pool: &PgPool,
    kind: &str,
    version: i32,
    manifest: &serde_json::Value,
) -> Result<(ApplyResult, i64), sqlx::Error> {
    let row = sqlx::query(
        "INSERT INTO kind_manifest AS m (kind, kind_version, manifest) VALUES ($1, $2, $3)
         ON CONFLICT (kind, kind_version) DO UPDATE SET manifest = EXCLUDED.manifest
           WHERE m.manifest IS DISTINCT FROM EXCLUDED.manifest
         RETURNING manifest_version, (xmax = 0) AS inserted",
    )
    .bind(kind)
    .bind(version)
    .bind(manifest)
    .fetch_optional(pool)
    .await?;
    match row {
        Some(r) => {
            let v: i64 = r.try_get(0)?;
            let inserted: bool = r.try_get(1)?;
            Ok((
                if inserted {
                    ApplyResult::Created
                } else {
                    ApplyResult::Configured
                },
                v,
            ))
        }
        None => {
            let v: i64 = sqlx::query_scalar(
                "SELECT manifest_version FROM kind_manifest WHERE kind = $1 AND kind_version = $2",
            )
            .bind(kind)
            .bind(version)
            .fetch_one(pool)
            .await?;
            Ok((ApplyResult::Unchanged, v))
        }
    }
}

/// The manifest of (kind, version), or of the kind's highest version when `version` is None.
pub async fn manifest_get(
    pool: &PgPool,
    kind: &str,
    version: Option<i32>,
) -> Result<Option<StoredManifest>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT kind, kind_version, manifest, manifest_version FROM kind_manifest
         WHERE kind = $1 AND ($2::int IS NULL OR kind_version = $2)
         ORDER BY kind_version DESC LIMIT 1",
    )
    .bind(kind)
    .bind(version)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(stored_manifest).transpose()
}

/// Every stored manifest, ordered by kind and version.
pub async fn manifest_list(pool: &PgPool) -> Result<Vec<StoredManifest>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT kind, kind_version, manifest, manifest_version FROM kind_manifest
         ORDER BY kind, kind_version",
    )
    .fetch_all(pool)
    .await?;
    rows.iter().map(stored_manifest).collect()
}

/// Every registered (kind, version), without the manifests.
pub async fn registered(pool: &PgPool) -> Result<Vec<KindPair>, sqlx::Error> {
    let rows: Vec<(String, i32)> =
        sqlx::query_as("SELECT kind, kind_version FROM kind_manifest ORDER BY kind, kind_version")
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|(k, v)| KindPair::new(k, v)).collect())
}

/// Every registered (kind, version) with its manifest's content hash (`manifest_version`),
/// without the manifests: what a cache compares to know which manifests changed.
pub async fn manifest_versions(pool: &PgPool) -> Result<Vec<(KindPair, i64)>, sqlx::Error> {
    let rows: Vec<(String, i32, i64)> = sqlx::query_as(
        "SELECT kind, kind_version, manifest_version FROM kind_manifest ORDER BY kind, kind_version",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(k, v, h)| (KindPair::new(k, v), h))
        .collect())
}

/// The stored manifests of `pairs` (kind, version), in one statement; a pair not registered
/// has no row.
pub async fn manifests_of(
    pool: &PgPool,
    pairs: &[(String, i32)],
) -> Result<Vec<StoredManifest>, sqlx::Error> {
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let (kinds, versions): (Vec<&str>, Vec<i32>) =
        pairs.iter().map(|(k, v)| (k.as_str(), *v)).unzip();
    let rows = sqlx::query(
        "SELECT m.kind, m.kind_version, m.manifest, m.manifest_version
         FROM unnest($1::text[], $2::int[]) AS p(kind, kind_version)
         JOIN kind_manifest m USING (kind, kind_version)",
    )
    .bind(&kinds)
    .bind(&versions)
    .fetch_all(pool)
    .await?;
    rows.iter().map(stored_manifest).collect()
}

/// Decodes a `kind, kind_version, manifest, manifest_version` row.
fn stored_manifest(r: &sqlx::postgres::PgRow) -> Result<StoredManifest, sqlx::Error> {
    Ok(StoredManifest {
        pair: KindPair::new(r.try_get::<String, _>(0)?, r.try_get(1)?),
        manifest: r.try_get(2)?,
        manifest_version: r.try_get(3)?,
    })
}

/// A kind's live operational config.
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
pub struct KindConfig {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Global concurrency cap (0 = unlimited).
    pub max_inflight: i32,
    /// Per-task deadline (0 = none).
    pub task_deadline_secs: i32,
    /// Drift re-observe interval (0 = off).
    pub resync_interval_secs: i32,
    /// Whether resync re-runs the composer.
    pub resync_recomposes: bool,
    /// Orphan grace.
    pub orphan_grace_secs: i32,
    /// Transient attempts before terminal (0 = unbounded).
    pub max_transient_attempts: i32,
    /// Finalizer from the manifest.
    pub finalizer_name: Option<String>,
    /// Retired versions accept no new resources.
    pub retired: bool,
}

/// Every kind's operational config.
pub async fn kind_config_list(pool: &PgPool) -> Result<Vec<KindConfig>, sqlx::Error> {
    sqlx::query_as::<_, KindConfig>(
        "SELECT kind, kind_version, max_inflight, task_deadline_secs, resync_interval_secs,
                resync_recomposes, orphan_grace_secs, max_transient_attempts, finalizer_name, retired
         FROM kind_config ORDER BY kind, kind_version",
    )
    .fetch_all(pool)
    .await
}

/// The operator-editable part of a kind's config (a full replace).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindConfigEdit {
    /// Global concurrency cap (0 = unlimited).
    pub max_inflight: i32,
    /// Per-task deadline in seconds (0 = none).
    pub task_deadline_seconds: i32,
    /// Drift re-observe interval (0 = off).
    pub resync_interval_seconds: i32,
    /// Orphan grace in seconds.
    pub orphan_grace_seconds: i32,
    /// Transient attempts before terminal (0 = unbounded).
    pub max_transient_attempts: i32,
    /// Whether resync re-runs the composer.
    #[serde(default)]
    pub resync_recomposes: bool,
    /// A retired version accepts no new resources.
    #[serde(default)]
    pub retired: bool,
}

/// Replaces the live config of (kind, version); `None` when that version has no manifest.
/// Takes effect at the next claim / drain (both read kind_config directly).
pub async fn kind_config_put(
    pool: &PgPool,
    kind: &str,
    version: i32,
    c: &KindConfigEdit,
) -> Result<Option<KindConfig>, sqlx::Error> {
    sqlx::query_as::<_, KindConfig>(
        "UPDATE kind_config SET max_inflight = $3, task_deadline_secs = $4,
                resync_interval_secs = $5, orphan_grace_secs = $6, max_transient_attempts = $7,
                resync_recomposes = $8, retired = $9, updated_at = now()
         WHERE kind = $1 AND kind_version = $2
         RETURNING kind, kind_version, max_inflight, task_deadline_secs, resync_interval_secs,
                   resync_recomposes, orphan_grace_secs, max_transient_attempts, finalizer_name, retired",
    )
    .bind(kind)
    .bind(version)
    .bind(c.max_inflight)
    .bind(c.task_deadline_seconds)
    .bind(c.resync_interval_seconds)
    .bind(c.orphan_grace_seconds)
    .bind(c.max_transient_attempts)
    .bind(c.resync_recomposes)
    .bind(c.retired)
    .fetch_optional(pool)
    .await
}

/// The live config of (kind, version).
pub async fn kind_config_get(
    pool: &PgPool,
    kind: &str,
    version: i32,
) -> Result<Option<KindConfig>, sqlx::Error> {
    sqlx::query_as::<_, KindConfig>(
        "SELECT kind, kind_version, max_inflight, task_deadline_secs, resync_interval_secs,
                resync_recomposes, orphan_grace_secs, max_transient_attempts, finalizer_name, retired
         FROM kind_config WHERE kind = $1 AND kind_version = $2",
    )
    .bind(kind)
    .bind(version)
    .fetch_optional(pool)
    .await
}

/// What [`kind_version_delete`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindVersionDelete {
    /// The version, its kind_config and its provider configs are gone.
    Deleted,
    /// No such kind version; nothing done.
    NotFound,
    /// Still in use; nothing done.
    InUse {
        /// Resources of that version.
        resources: i64,
        /// Reactor bindings naming the kind (counted only when this is its last version).
        bindings: i64,
    },
}

/// Deletes kind version (kind, version) with its kind_config and provider configs, unless
/// resources of it exist (or, for the kind's last version, reactor bindings name the kind).
/// One statement: SQL `kind_version_delete` holds the lock that keeps resource writes of that
/// version out of the way until it commits, so a resource applied meanwhile is either counted
/// or refused.
pub async fn kind_version_delete(
    pool: &PgPool,
    kind: &str,
    version: i32,
) -> Result<KindVersionDelete, sqlx::Error> {
    let (registered, resources, bindings): (bool, i64, i64) = sqlx::query_as(
        "SELECT registered, resource_count, binding_count FROM kind_version_delete($1, $2)",
    )
    .bind(kind)
    .bind(version)
    .fetch_one(pool)
    .await?;
    Ok(match (registered, resources, bindings) {
        (false, _, _) => KindVersionDelete::NotFound,
        (true, 0, 0) => KindVersionDelete::Deleted,
        (true, resources, bindings) => KindVersionDelete::InUse {
            resources,
            bindings,
        },
    })
}

/// Whether any resource uses (kind, version).
pub async fn version_in_use(pool: &PgPool, kind: &str, version: i32) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM resources WHERE kind = $1 AND kind_version = $2)",
    )
    .bind(kind)
    .bind(version)
    .fetch_one(pool)
    .await
}

/// Whether (kind, version) is retired (takes no new resources).
pub async fn version_retired(pool: &PgPool, kind: &str, version: i32) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT coalesce((SELECT retired FROM kind_config WHERE kind = $1 AND kind_version = $2),
                         false)",
    )
    .bind(kind)
    .bind(version)
    .fetch_one(pool)
    .await
}

/// The kind version resource (kind, name) has now (`None`: no such resource).
pub async fn resource_version(
    pool: &PgPool,
    kind: &str,
    name: &str,
) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar("SELECT kind_version FROM resources WHERE kind = $1 AND name = $2")
        .bind(kind)
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// A kind's default provider config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DefaultConfig {
    /// Which version of the default this is: the row's `xmin` (a new value on every write),
    /// 0 when the kind has no default. `work_claim` returns the same stamp, which is how the
    /// broker tells a claim that saw a default it has not pushed yet.
    pub rev: i64,
    /// The config spec JSON (empty when absent).
    pub spec: Vec<u8>,
    /// The bundle (empty when absent).
    pub bundle: Vec<u8>,
}

/// The row version ([`DefaultConfig::rev`]) of each pair's default provider config, for the
/// pairs that have one: a cheap check before reading specs and bundles (a WASM bundle runs
/// to megabytes).
pub async fn providerconfig_default_revs(
    pool: &PgPool,
    pairs: &[KindPair],
) -> Result<Vec<(KindPair, i64)>, sqlx::Error> {
    Ok(default_configs(pool, pairs, false)
        .await?
        .into_iter()
        .map(|(pair, c)| (pair, c.rev))
        .collect())
}

/// Loads the default provider config of each pair that has one.
pub async fn providerconfig_defaults(
    pool: &PgPool,
    pairs: &[KindPair],
) -> Result<Vec<(KindPair, DefaultConfig)>, sqlx::Error> {
    default_configs(pool, pairs, true).await
}

/// The default provider configs of `pairs`, with their specs and bundles only when `bodies`
/// (otherwise both empty).
async fn default_configs(
    pool: &PgPool,
    pairs: &[KindPair],
    bodies: bool,
) -> Result<Vec<(KindPair, DefaultConfig)>, sqlx::Error> {
    let (kinds, versions) = pair_columns(pairs);
    let rows = sqlx::query(
        "SELECT pc.kind, pc.kind_version, pc.xmin::text::bigint,
                CASE WHEN $3 THEN pc.spec::text END, CASE WHEN $3 THEN pc.data END
         FROM providerconfigs pc
         JOIN unnest($1::text[], $2::int[]) AS x(kind, kind_version)
           ON pc.kind = x.kind AND pc.kind_version = x.kind_version
         WHERE pc.is_default",
    )
    .bind(&kinds)
    .bind(&versions)
    .bind(bodies)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let spec: Option<String> = r.try_get(3)?;
            let data: Option<Vec<u8>> = r.try_get(4)?;
            Ok((
                KindPair::new(r.try_get::<String, _>(0)?, r.try_get(1)?),
                DefaultConfig {
                    rev: r.try_get(2)?,
                    spec: spec.map(String::into_bytes).unwrap_or_default(),
                    bundle: data.unwrap_or_default(),
                },
            ))
        })
        .collect()
}

/// `pairs` as the two parallel arrays the query above unnests.
fn pair_columns(pairs: &[KindPair]) -> (Vec<&str>, Vec<i32>) {
    (
        pairs.iter().map(|p| p.kind.as_str()).collect(),
        pairs.iter().map(|p| p.version).collect(),
    )
}
