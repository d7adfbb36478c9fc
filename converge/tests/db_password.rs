//! Database credentials that rotate (issue 46, item 5) against the real `converge` binary and
//! a PostgreSQL of its own that asks for passwords (scram-sha-256 for every role but the
//! test's superuser): `converge migrate` and `converge serve` sign in with only
//! `DATABASE_PASSWORD_COMMAND`'s password (the URL holds none), converge reconnects after
//! the database restarts, and after the role's password is changed (ALTER ROLE, and the
//! command's output with it) the connections it opens use the new one
//! (`DATABASE_MAX_CONN_LIFETIME` recycles the old ones). The read replica's pool
//! (`DATABASE_READ_URL`) signs in the same way and follows the rotation too.

mod common;

use std::{path::Path, time::Duration};

use common::{free_port, wait_for};
use converge_control::devdb::{DevDb, DevDbConfig};
use serde_json::json;
use sqlx::{Connection, PgConnection};

/// Writes `password` where the command reads it (write, then rename: never half a file).
fn set_password_file(path: &Path, password: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{password}\n")).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn start_db(data_dir: &Path, hba: &Path, port: Option<u16>) -> DevDb {
    DevDb::start(DevDbConfig {
        data_dir: data_dir.to_path_buf(),
        port,
        settings: vec![
            format!("hba_file={}", hba.display()),
            "password_encryption=scram-sha-256".into(),
        ],
    })
    .await
    .expect("start PostgreSQL with password authentication")
}

async fn admin(db: &DevDb) -> PgConnection {
    PgConnection::connect(&db.admin_url()).await.unwrap()
}

/// Whether a request that writes to the database succeeds.
async fn writes(http: &str, name: &str) -> bool {
    let body = json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}});
    let r = reqwest::Client::new()
        .post(format!("{http}/api/v1/resources"))
        .json(&body)
        .send()
        .await;
    r.is_ok_and(|r| r.status().is_success())
}

/// Whether the resource list answers 200 from the read replica's pool.
async fn reads_from_replica(http: &str) -> bool {
    let r = reqwest::get(format!("{http}/api/v1/resources")).await;
    r.is_ok_and(|r| {
        r.status() == 200
            && r.headers()
                .get("x-converge-read-source")
                .is_some_and(|v| v == "replica")
    })
}

#[tokio::test]
async fn converge_signs_in_with_the_commands_password_and_follows_its_rotation() {
    let dir = converge_auth::testing::scratch_dir("dbpw");
    let data_dir = dir.join("pg");
    // Inside the data dir: DevDb hands it to the server's user, who must read the file.
    std::fs::create_dir_all(data_dir.join("conf")).unwrap();
    let hba = data_dir.join("conf/pg_hba.conf");
    // The test's superuser keeps trust (it sets the scene); the role converge uses must
    // prove its password.
    std::fs::write(
        &hba,
        "local all converge trust\n\
         host all converge 127.0.0.1/32 trust\n\
         local all all scram-sha-256\n\
         host all all 127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap();
    let db = start_db(&data_dir, &hba, None).await;
    let port = db.port();
    let mut a = admin(&db).await;
    for sql in [
        "CREATE ROLE app LOGIN PASSWORD 'first-pw-1'",
        "CREATE DATABASE app OWNER app",
    ] {
        sqlx::raw_sql(sql).execute(&mut a).await.unwrap();
    }
    let url = format!("postgres://app@127.0.0.1:{port}/app");
    let with_pw = |pw: &str| format!("postgres://app:{pw}@127.0.0.1:{port}/app");
    // The server really asks: no password, or a wrong one, is refused.
    assert!(PgConnection::connect(&url).await.is_err());
    assert!(PgConnection::connect(&with_pw("wrong")).await.is_err());
    PgConnection::connect(&with_pw("first-pw-1")).await.unwrap();

    let pw_file = dir.join("db-password");
    set_password_file(&pw_file, "first-pw-1");
    let command = format!("cat '{}'", pw_file.display());
    let converge = env!("CARGO_BIN_EXE_converge");

    // `converge migrate` signs in the same way, and cannot without the command.
    let migrate = |with_command: bool| {
        let mut cmd = converge_testkit::clean_command(converge);
        cmd.args(["migrate", "up"]).env("DATABASE_URL", &url);
        if with_command {
            cmd.env("DATABASE_PASSWORD_COMMAND", &command);
        }
        cmd
    };
    let out = migrate(false).output().await.unwrap();
    assert!(!out.status.success(), "no password: migrate must fail");
    let out = migrate(true).output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (hp, gp) = (free_port(), free_port());
    let http = format!("http://127.0.0.1:{hp}");
    // The read replica's URL (the same server: a primary passes the lag check) holds no
    // password either: its pool signs in with the command's.
    let env = [
        ("DATABASE_PASSWORD_COMMAND", command.as_str()),
        ("DATABASE_MAX_CONN_LIFETIME", "2s"),
        ("DATABASE_READ_URL", url.as_str()),
    ];
    let mut child = common::serve_command(&url, hp, gp, &env)
        .spawn()
        .expect("spawn converge");
    let ready = || async {
        reqwest::get(format!("{http}/readyz"))
            .await
            .ok()
            .filter(|r| r.status() == 200)
            .map(|_| ())
    };
    wait_for(
        Duration::from_secs(60),
        "converge on the command's password",
        ready,
    )
    .await;
    let r = reqwest::Client::new()
        .put(format!("{http}/api/v1/kinds/hello/manifest"))
        .json(&common::Converge::hello_manifest(30))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    assert!(writes(&http, "before-restart").await);
    wait_for(
        Duration::from_secs(30),
        "a list read from the replica, signed in with the command's password",
        || async { reads_from_replica(&http).await.then_some(()) },
    )
    .await;

    // The database restarts: every connection drops, and converge signs in again.
    drop(a);
    db.stop().await.unwrap();
    let db = start_db(&data_dir, &hba, Some(port)).await;
    wait_for(
        Duration::from_secs(60),
        "a write after the database restarted",
        || async { writes(&http, "after-restart").await.then_some(()) },
    )
    .await;

    // The password rotates: the role's, then what the command prints.
    let mut a = admin(&db).await;
    sqlx::raw_sql("ALTER ROLE app PASSWORD 'second-pw-2'")
        .execute(&mut a)
        .await
        .unwrap();
    let rotated_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut a)
        .await
        .unwrap();
    set_password_file(&pw_file, "second-pw-2");
    assert!(PgConnection::connect(&with_pw("first-pw-1")).await.is_err());
    // Connections opened from now on can only have signed in with the new password; the
    // lifetime (2 s) recycles the old ones, so new ones come without a restart.
    let admin_url = db.admin_url();
    let mut n = 0;
    wait_for(
        Duration::from_secs(60),
        "converge's connections opened after the rotation, and a write",
        || {
            n += 1;
            let name = format!("after-rotation-{n}");
            let (admin_url, http) = (admin_url.clone(), http.clone());
            async move {
                let mut c = PgConnection::connect(&admin_url).await.ok()?;
                // The primary's pool and the replica's, each with a connection opened since.
                let (fresh, fresh_reads): (i64, i64) = sqlx::query_as(
                    "SELECT count(*) FILTER (WHERE application_name = 'converge'),
                            count(*) FILTER (WHERE application_name = 'converge-read')
                     FROM pg_stat_activity
                     WHERE usename = 'app' AND backend_start > $1",
                )
                .bind(rotated_at)
                .fetch_one(&mut c)
                .await
                .ok()?;
                (fresh >= 2
                    && fresh_reads >= 1
                    && writes(&http, &name).await
                    && reads_from_replica(&http).await)
                    .then_some(())
            }
        },
    )
    .await;
    wait_for(
        Duration::from_secs(30),
        "converge ready after the rotation",
        ready,
    )
    .await;

    child.kill().await.unwrap();
    a.close().await.unwrap();
    db.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
