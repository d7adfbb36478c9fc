//! Test helpers (feature `test-util`): one fresh, migrated database per test and the one
//! polling helper tests use instead of sleeps. Starting a real server on free ports is in
//! `converge_control::testing`.
//!
//! [`TestDb::new`] needs `CONVERGE_TEST_DATABASE_URL`, an admin URL (database `postgres`, a role
//! that may create databases) of a running server; `./scripts/test.sh` starts a private one and
//! sets it. Each set of migrations and engine files is applied once, to a template database
//! `converge_tmpl_<hash of the migrations' checksums and the engine files>`; every test gets
//! `CREATE DATABASE test_<uuid> TEMPLATE ...`, which is a file copy and takes milliseconds.

use std::{str::FromStr, sync::mpsc, time::Duration};

use crate::db::{EngineSettings, MIGRATOR, engine_sql::ENGINE_FILES};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool, postgres::PgConnectOptions};
use tokio::sync::OnceCell;

/// The environment variable naming the admin URL of the test server.
pub const TEST_DATABASE_URL_ENV: &str = "CONVERGE_TEST_DATABASE_URL";

/// Advisory lock key serialising template creation across test processes ("cvgtmpl").
const TEMPLATE_LOCK_KEY: i64 = 0x6376_6774_6d70_6c00;

/// How long `CREATE DATABASE ... TEMPLATE` is retried while the template is still in use.
const CLONE_TIMEOUT: Duration = Duration::from_secs(30);

/// The template's name, once this process has made sure it exists.
static TEMPLATE: OnceCell<String> = OnceCell::const_new();

/// A fresh database for one test, cloned from the migrated template.
///
/// Dropping it drops the database: a helper thread (with its own runtime, so it works from any
/// context) runs `DROP DATABASE ... WITH (FORCE)`, which also disconnects `pool`'s sessions; the
/// drop waits up to a few seconds for it. If the test is panicking the database is kept, and its
/// URL printed, for inspection. Anything left behind goes with the throwaway cluster.
#[derive(Debug)]
pub struct TestDb {
    /// URL of this test's database.
    pub url: String,
    /// A pool on this test's database, with the engine settings of
    /// [`crate::db::connect`].
    pub pool: PgPool,
    name: String,
    admin_url: String,
}

impl TestDb {
    /// Creates a fresh database with every migration applied.
    ///
    /// # Panics
    /// If `CONVERGE_TEST_DATABASE_URL` is unset or the server cannot be used: test setup
    /// failures should fail the test loudly.
    pub async fn new() -> TestDb {
        let admin_url = admin_url();
        let template = TEMPLATE
            .get_or_init(|| ensure_template(&admin_url))
            .await
            .clone();
        TestDb::create(admin_url, Some(&template)).await
    }

    /// Creates an empty database: nothing migrated, for tests of the migrate step itself
    /// (a fresh boot, an old database restored from a dump).
    ///
    /// # Panics
    /// As [`TestDb::new`].
    pub async fn empty() -> TestDb {
        TestDb::create(admin_url(), None).await
    }

    async fn create(admin_url: String, template: Option<&str>) -> TestDb {
        let name = format!("test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = admin_connect(&admin_url).await;
        let sql = match template {
            Some(template) => format!("CREATE DATABASE {name} TEMPLATE {template}"),
            None => format!("CREATE DATABASE {name}"),
        };
        let deadline = tokio::time::Instant::now() + CLONE_TIMEOUT;
        loop {
            match sqlx::query(AssertSqlSafe(sql.clone()))
                .execute(&mut admin)
                .await
            {
                Ok(_) => break,
                // Some session (a template builder's pool just closing, or another test's
                // clone) still holds the template; PostgreSQL refuses to copy it meanwhile.
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some("55006")
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("failed to create test database {name} ({sql}): {e}"),
            }
        }
        let _ = admin.close().await;

        let url = with_database(&admin_url, &name);
        let pool = crate::db::connect(&url, 8, &EngineSettings::default())
            .await
            .unwrap_or_else(|e| panic!("failed to connect to test database {name}: {e}"));
        TestDb {
            url,
            pool,
            name,
            admin_url,
        }
    }

    /// The name of this test's database.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers `kind` version 1 as the smallest leaf kind: one reaction, `work` on a spec
    /// change, emitting a status. What engine and API tests apply resources of.
    ///
    /// # Panics
    /// If the insert fails.
    pub async fn leaf_kind(&self, kind: &str) {
        sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ($1, 1, $2)")
            .bind(kind)
            .bind(serde_json::json!({"kind": kind, "kind_version": 1,
            "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
            .execute(&self.pool)
            .await
            .expect("register a leaf kind");
    }

    /// The one number `sql` answers (a `count(*)`, typically).
    ///
    /// # Panics
    /// If the query fails, naming it.
    pub async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Rows on which `resource_lag` and `resources` disagree (migration 0021: it must hold
    /// exactly the rows behind their spec, with their root, owner and gate flags): 0 when
    /// they agree.
    ///
    /// # Panics
    /// If the query fails.
    pub async fn lag_mismatches(&self) -> i64 {
        sqlx::query_scalar(
            "WITH want AS (
                 SELECT shard_id, id, root_id, owner_id,
                        failure_gen <> generation AND frozen_until IS NULL
                            AND deletion_requested_at IS NULL AS unsettled,
                        failure_gen = generation OR frozen_until IS NOT NULL AS stuck
                 FROM resources WHERE synced_gen < generation),
             have AS (SELECT shard_id, id, root_id, owner_id, unsettled, stuck FROM resource_lag)
             SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT SELECT * FROM have) a)
                  + (SELECT count(*) FROM (SELECT * FROM have EXCEPT SELECT * FROM want) b)",
        )
        .fetch_one(&self.pool)
        .await
        .expect("compare resource_lag with resources")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test failed; keeping its database for inspection: {}",
                self.url
            );
            return;
        }
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let (done_tx, done_rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("drop-{name}"))
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async {
                    if let Ok(mut conn) = PgConnection::connect(&admin_url).await {
                        // FORCE terminates the sessions still open on it (this test's pool).
                        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                        let _ = sqlx::query(AssertSqlSafe(sql)).execute(&mut conn).await;
                        let _ = conn.close().await;
                    }
                });
                let _ = done_tx.send(());
            });
        if spawned.is_ok() {
            // Bounded, so a wedged server cannot hang the test; the thread needs nothing from
            // the caller's runtime, so blocking here cannot deadlock.
            let _ = done_rx.recv_timeout(Duration::from_secs(10));
        }
    }
}

/// The one polling helper of every test (defined in `converge-testkit`).
pub use converge_testkit::{pg_bin_dir, wait_for};

/// The admin URL of the test server, from `CONVERGE_TEST_DATABASE_URL`.
fn admin_url() -> String {
    std::env::var(TEST_DATABASE_URL_ENV).unwrap_or_else(|_| {
        panic!(
            "{TEST_DATABASE_URL_ENV} is not set: database tests need a running PostgreSQL. \
             Run them with ./scripts/test.sh, or start a throwaway server with \
             `eval \"$(scripts/pg-test-cluster.sh start /tmp/converge-pg)\"`"
        )
    })
}

/// Makes sure the template for the embedded migrations exists and returns its name.
///
/// Runs under a session advisory lock, so concurrent test processes build it once; the others
/// wait and then find it ready. A template is ready once marked `IS_TEMPLATE` (done last), so one
/// left half-built by a killed process is dropped and rebuilt. Connections to it are disallowed
/// once ready, so no stray session can block cloning.
async fn ensure_template(admin_url: &str) -> String {
    let name = template_name();
    let mut admin = admin_connect(admin_url).await;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(TEMPLATE_LOCK_KEY)
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("failed to take the template lock: {e}"));

    let ready: Option<bool> =
        sqlx::query_scalar("SELECT datistemplate FROM pg_database WHERE datname = $1")
            .bind(&name)
            .fetch_optional(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("failed to look up template {name}: {e}"));
    if ready != Some(true) {
        let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
            panic!("failed to {what} template database {name}: {e}")
        };
        for sql in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            if let Err(e) = sqlx::query(AssertSqlSafe(sql)).execute(&mut admin).await {
                fail("create", &e);
            }
        }
        let url = with_database(admin_url, &name);
        let pool = crate::db::connect(&url, 2, &EngineSettings::default())
            .await
            .unwrap_or_else(|e| fail("connect to", &e));
        if let Err(e) = crate::db::migrate(&pool).await {
            fail("migrate", &e);
        }
        pool.close().await;
        let sql = format!("ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false");
        if let Err(e) = sqlx::query(AssertSqlSafe(sql)).execute(&mut admin).await {
            fail("finish", &e);
        }
    }

    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(TEMPLATE_LOCK_KEY)
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("failed to release the template lock: {e}"));
    let _ = admin.close().await;
    name
}

/// `converge_tmpl_<hash>`: a stable FNV-1a hash of every migration's version and checksum and
/// of every engine file's name and content, so a new or changed migration or engine file gets
/// a new template.
fn template_name() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for migration in MIGRATOR.iter() {
        feed(&migration.version.to_le_bytes());
        feed(&migration.checksum);
    }
    for file in ENGINE_FILES {
        feed(file.name.as_bytes());
        feed(file.sql.as_bytes());
    }
    format!("converge_tmpl_{hash:016x}")
}

async fn admin_connect(admin_url: &str) -> PgConnection {
    let opts = PgConnectOptions::from_str(admin_url)
        .unwrap_or_else(|e| panic!("{TEST_DATABASE_URL_ENV} is not a valid PostgreSQL URL: {e}"));
    PgConnection::connect_with(&opts).await.unwrap_or_else(|e| {
        panic!("failed to connect to {TEST_DATABASE_URL_ENV} ({admin_url}): {e}")
    })
}

/// `url` with its database (the path) replaced by `database`, keeping any query string.
fn with_database(url: &str, database: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let (base, query) = match url.find('?') {
        Some(q) => url.split_at(q),
        None => (url, ""),
    };
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    format!("{base}/{database}{query}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_can_run_on_a_multi_threaded_runtime() {
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&TestDb::new());
    }

    #[test]
    fn replaces_the_database_in_a_url() {
        assert_eq!(
            with_database("postgres://converge@127.0.0.1:5432/postgres", "test_x"),
            "postgres://converge@127.0.0.1:5432/test_x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/postgres?sslmode=disable", "t"),
            "postgres://u:p@h:1/t?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "t"), "postgres://h:1/t");
    }

    #[test]
    fn names_the_template_after_the_migrations() {
        let name = template_name();
        assert!(name.starts_with("converge_tmpl_") && name.len() == "converge_tmpl_".len() + 16);
        assert_eq!(name, template_name());
    }

    #[tokio::test]
    async fn wait_for_returns_the_first_some() {
        let mut calls = 0;
        let got = wait_for(Duration::from_secs(1), "the third call", || {
            calls += 1;
            let n = calls;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for nothing")]
    async fn wait_for_panics_on_timeout() {
        wait_for(Duration::from_millis(100), "nothing", || async {
            None::<()>
        })
        .await;
    }
}
