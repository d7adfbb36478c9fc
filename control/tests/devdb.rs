//! The embedded development database: starts from the system's PostgreSQL binaries in a fresh
//! data directory, serves queries, stops, and starts again on the same data directory.

use std::path::PathBuf;

use converge_control::devdb::{DevDb, DevDbConfig};
use sqlx::{Connection, PgConnection};

/// A scratch directory under the system temp dir, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> ScratchDir {
        let dir =
            std::env::temp_dir().join(format!("converge-devdb-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn select_one(url: &str) -> i32 {
    let mut conn = PgConnection::connect(url)
        .await
        .expect("connect to the dev database");
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .expect("SELECT 1");
    conn.close().await.expect("close");
    one
}

#[tokio::test]
async fn starts_serves_stops_and_restarts_on_the_same_data_dir() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let scratch = ScratchDir::new();
    let data_dir = scratch.0.join("dev");
    let cfg = DevDbConfig {
        data_dir: data_dir.clone(),
        port: None,
        settings: Vec::new(),
    };

    let db = DevDb::start(cfg.clone()).await.expect("first start");
    assert!(db.url().ends_with("/converge"), "{}", db.url());
    assert!(db.admin_url().ends_with("/postgres"), "{}", db.admin_url());
    assert_eq!(select_one(&db.url()).await, 1);
    {
        // Leave a mark to prove the second start reuses the cluster rather than re-initialising.
        let mut conn = PgConnection::connect(&db.url()).await.expect("connect");
        sqlx::query("CREATE TABLE survives_restart (id int)")
            .execute(&mut conn)
            .await
            .expect("create table");
        conn.close().await.expect("close");
    }
    let initialised = std::fs::metadata(data_dir.join("pgdata/PG_VERSION"))
        .expect("PG_VERSION")
        .modified()
        .expect("mtime");
    db.stop().await.expect("first stop");
    assert!(
        !data_dir.join("pgdata/postmaster.pid").exists(),
        "server left its pid file behind"
    );

    let db = DevDb::start(cfg).await.expect("second start");
    assert_eq!(select_one(&db.url()).await, 1);
    let mut conn = PgConnection::connect(&db.url()).await.expect("connect");
    let kept: bool = sqlx::query_scalar("SELECT to_regclass('survives_restart') IS NOT NULL")
        .fetch_one(&mut conn)
        .await
        .expect("look up table");
    conn.close().await.expect("close");
    assert!(kept, "the second start re-initialised the cluster");
    let still = std::fs::metadata(data_dir.join("pgdata/PG_VERSION"))
        .expect("PG_VERSION")
        .modified()
        .expect("mtime");
    assert_eq!(initialised, still);
    db.stop().await.expect("second stop");
}

#[tokio::test]
async fn removes_a_stale_pid_file_and_rejects_another_major_version() {
    let scratch = ScratchDir::new();
    let data_dir = scratch.0.join("dev");
    let cfg = DevDbConfig {
        data_dir: data_dir.clone(),
        port: None,
        settings: Vec::new(),
    };
    DevDb::start(cfg.clone())
        .await
        .expect("start")
        .stop()
        .await
        .expect("stop");

    // A previous run that was killed, and its pid since reused by a process that is no
    // PostgreSQL. PostgreSQL alone would refuse to start over this pid file.
    let pgdata = data_dir.join("pgdata");
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    std::fs::write(
        pgdata.join("postmaster.pid"),
        format!("{}\n{}\n", other.id(), pgdata.display()),
    )
    .expect("write pid file");
    let started = DevDb::start(cfg.clone()).await;
    let _ = other.kill();
    let _ = other.wait();
    let db = started.expect("start over a stale pid file");
    assert_eq!(select_one(&db.url()).await, 1);
    db.stop().await.expect("stop");

    // A cluster made by another major version is refused with an explanation.
    std::fs::write(pgdata.join("PG_VERSION"), "9.6\n").expect("write PG_VERSION");
    let err = DevDb::start(cfg).await.expect_err("start on a 9.6 cluster");
    let msg = err.to_string();
    assert!(msg.contains("PostgreSQL 9.6"), "{msg}");
}

#[tokio::test]
async fn as_root_an_unreachable_data_dir_is_a_clear_error() {
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .expect("id -u");
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("not root: nothing to check");
        return;
    }
    let scratch = ScratchDir::new();
    let private = scratch.0.join("private");
    std::fs::create_dir(&private).expect("create private dir");
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod 700");
    let cfg = DevDbConfig {
        data_dir: private.join("dev"),
        port: None,
        settings: Vec::new(),
    };
    let err = DevDb::start(cfg)
        .await
        .expect_err("start in a dir PostgreSQL cannot reach");
    let msg = err.to_string();
    assert!(msg.contains("cannot write"), "{msg}");
}
