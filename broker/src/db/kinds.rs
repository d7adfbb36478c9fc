//! Reads of kind manifests and default provider configs (the broker's caches' source).

use sqlx::{PgPool, Row};

use crate::{
    error::{Error, Result},
    ids::KindPair,
};

/// What the broker needs from a manifest to route a task.
#[derive(Debug, Clone)]
pub struct ManifestRow {
    /// The (kind, version).
    pub pair: KindPair,
    /// The manifest document.
    pub manifest: serde_json::Value,
    /// Its content hash.
    pub manifest_version: i64,
}

/// Loads every manifest.
pub async fn manifest_list(pool: &PgPool) -> Result<Vec<ManifestRow>> {
    let rows =
        sqlx::query("SELECT kind, kind_version, manifest, manifest_version FROM kind_manifest")
            .fetch_all(pool)
            .await
            .map_err(Error::db("load kind manifests"))?;
    rows.into_iter()
        .map(|r| {
            Ok(ManifestRow {
                pair: KindPair::new(r.try_get::<String, _>(0)?, r.try_get(1)?),
                manifest: r.try_get(2)?,
                manifest_version: r.try_get(3)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(Error::db("decode kind manifests"))
}

/// A kind's default provider config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DefaultConfig {
    /// The config spec JSON (empty when absent).
    pub spec: Vec<u8>,
    /// The bundle (empty when absent).
    pub bundle: Vec<u8>,
}

/// Loads the default provider config of each pair that has one.
pub async fn providerconfig_defaults(
    pool: &PgPool,
    pairs: &[KindPair],
) -> Result<Vec<(KindPair, DefaultConfig)>> {
    let kinds: Vec<&str> = pairs.iter().map(|p| p.kind.as_str()).collect();
    let versions: Vec<i32> = pairs.iter().map(|p| p.version).collect();
    let rows = sqlx::query(
        "SELECT pc.kind, pc.kind_version, pc.spec::text, pc.data
         FROM providerconfigs pc
         JOIN unnest($1::text[], $2::int[]) AS x(kind, kind_version)
           ON pc.kind = x.kind AND pc.kind_version = x.kind_version
         WHERE pc.is_default",
    )
    .bind(&kinds)
    .bind(&versions)
    .fetch_all(pool)
    .await
    .map_err(Error::db("load default provider configs"))?;
    rows.into_iter()
        .map(|r| {
            let spec: Option<String> = r.try_get(2)?;
            let data: Option<Vec<u8>> = r.try_get(3)?;
            Ok((
                KindPair::new(r.try_get::<String, _>(0)?, r.try_get(1)?),
                DefaultConfig {
                    spec: spec.map(String::into_bytes).unwrap_or_default(),
                    bundle: data.unwrap_or_default(),
                },
            ))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(Error::db("decode default provider configs"))
}
