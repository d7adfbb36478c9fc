//! `engine/schema.sql` is the schema a migrate produces: a fresh database, and one migrated
//! before the baseline squash (the committed fixture) once adopted, dump exactly that file.

use std::{path::Path, process::Command};

use converge_engine::{
    db::{
        MIGRATOR,
        engine_sql::{ENGINE_FILES, MigrateError, migrate},
    },
    testing::{TestDb, pg_bin_dir},
};
use sqlx::{Connection, PgConnection};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
}

/// `pg_dump --schema-only` of `url`, normalised as scripts/gen-schema.sh does.
fn schema_dump(url: &str) -> String {
    let out = Command::new(pg_bin_dir().join("pg_dump"))
        .args([
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "--exclude-table=public._sqlx_migrations",
            url,
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    normalise(&String::from_utf8(out.stdout).unwrap())
}

/// The `sed` and `cat -s` of scripts/gen-schema.sh.
fn normalise(dump: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in dump.lines() {
        if line.starts_with("-- Dumped from ")
            || line.starts_with("-- Dumped by ")
            || line.starts_with("\\restrict ")
            || line.starts_with("\\unrestrict ")
            || line.starts_with("SET ")
            || line.starts_with("SELECT pg_catalog.set_config")
        {
            continue;
        }
        if line.is_empty() {
            if blank {
                continue;
            }
            blank = true;
        } else {
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A unified-ish diff of two texts: the lines only in one of them, with line numbers.
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < w.len() || j < g.len() {
        if i < w.len() && j < g.len() && w[i] == g[j] {
            i += 1;
            j += 1;
        } else if j < g.len() && !w[i..].contains(&g[j]) {
            out.push(format!("+{:>5} {}", j + 1, g[j]));
            j += 1;
        } else if i < w.len() {
            out.push(format!("-{:>5} {}", i + 1, w[i]));
            i += 1;
        } else {
            out.push(format!("+{:>5} {}", j + 1, g[j]));
            j += 1;
        }
        if out.len() > 200 {
            out.push("...".into());
            break;
        }
    }
    out.join("\n")
}

fn assert_schema_sql(got: &str, what: &str) {
    let want = std::fs::read_to_string(repo().join("engine/schema.sql")).expect("read schema.sql");
    assert!(
        got == want,
        "{what} does not produce engine/schema.sql (- schema.sql, + database). If the change \
         is meant, run scripts/gen-schema.sh and commit engine/schema.sql:\n{}",
        diff(&want, got)
    );
}

#[tokio::test]
async fn a_fresh_migrate_produces_schema_sql() {
    let db = TestDb::empty().await;
    migrate(&db.pool).await.expect("migrate a fresh database");
    assert_schema_sql(&schema_dump(&db.url), "a fresh migrate");
}

/// The committed pg_dump (schema and data) of a database migrated by the old 0001-0025,
/// written by scripts/gen-pre-baseline-fixture.sh.
const PRE_BASELINE: &str = include_str!("fixtures/pre_baseline.sql");

/// Restores the fixture into `db` on a connection of its own (the dump empties search_path
/// for its session).
async fn restore_pre_baseline(db: &TestDb) {
    let mut conn = PgConnection::connect(&db.url).await.expect("connect");
    sqlx::raw_sql(PRE_BASELINE)
        .execute(&mut conn)
        .await
        .expect("restore the fixture");
    conn.close().await.expect("close");
}

#[tokio::test]
async fn a_database_from_before_the_baseline_is_adopted_with_nothing_lost() {
    let db = TestDb::empty().await;
    restore_pre_baseline(&db).await;
    let tables = [
        "SELECT count(*) FROM resources",
        "SELECT count(*) FROM resource_deps",
        "SELECT count(*) FROM work_queue",
        "SELECT count(*) FROM work_queue WHERE lease_token IS NOT NULL",
        "SELECT count(*) FROM work_outbox",
        "SELECT count(*) FROM spec_versions",
        "SELECT count(*) FROM resource_events",
        "SELECT count(*) FROM kind_manifest",
        "SELECT count(*) FROM kind_config",
        "SELECT count(*) FROM resource_lag",
    ];
    let mut before = Vec::new();
    for sql in tables {
        before.push(db.count(sql).await);
    }
    assert_eq!(db.count("SELECT count(*) FROM _sqlx_migrations").await, 25);

    migrate(&db.pool).await.expect("migrate the old database");

    let mut after = Vec::new();
    for sql in tables {
        after.push(db.count(sql).await);
    }
    assert_eq!(after, before, "rows of {tables:?}");
    assert_eq!(before[0], 5);
    // The old history is replaced by the baseline, and the migrations after it apply.
    let history: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, description FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    let want: Vec<(i64, String)> = MIGRATOR
        .iter()
        .map(|m| (m.version, m.description.to_string()))
        .collect();
    assert_eq!(history.first(), Some(&(1, "baseline".to_owned())));
    assert_eq!(history, want);
    assert_eq!(
        db.count("SELECT count(*) FROM engine_sql").await,
        i64::try_from(ENGINE_FILES.len()).unwrap()
    );
    assert_eq!(db.lag_mismatches().await, 0);
    assert_schema_sql(&schema_dump(&db.url), "migrating the pre-baseline fixture");

    // A second migrate finds nothing to do.
    migrate(&db.pool).await.expect("migrate again");
}

#[tokio::test]
async fn another_old_history_is_refused() {
    let db = TestDb::empty().await;
    restore_pre_baseline(&db).await;
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 25")
        .execute(&db.pool)
        .await
        .unwrap();
    let err = migrate(&db.pool).await.expect_err("a partial old history");
    assert!(
        matches!(err, MigrateError::Migrations(_)),
        "sqlx refuses it: {err:?}"
    );
    let history: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(history, 24, "the history is left as it was");
}
