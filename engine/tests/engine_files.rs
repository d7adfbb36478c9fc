//! The engine files (`engine/sql/`): every function is defined once in the whole tree, the
//! embedded list is `engine/sql/ORDER`, and a migrate applies a changed file again while it
//! leaves an unchanged one alone.

use std::{collections::BTreeMap, path::Path};

use converge_engine::{
    db::engine_sql::{
        ENGINE_FILES, EngineFile, EngineFileState, engine_file_status, migrate, migrate_files,
    },
    testing::TestDb,
};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
}

/// The SQL files of `dir` (relative to the repository root), sorted, with their content.
fn sql_files(dir: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&p).expect("read a SQL file"))
        })
        .collect();
    out.sort();
    out
}

/// The names of the functions `sql` creates (`CREATE [OR REPLACE] FUNCTION name(`), comments
/// left out.
fn created_functions(sql: &str) -> Vec<String> {
    let text: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .to_lowercase();
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if *w != "create" {
            continue;
        }
        let rest = &words[i + 1..];
        let name = match rest {
            ["function", name, ..] => name,
            ["or", "replace", "function", name, ..] => name,
            _ => continue,
        };
        let name = name.split('(').next().unwrap_or(name);
        out.push(name.trim_start_matches("public.").to_owned());
    }
    out
}

#[test]
fn every_function_is_defined_once_in_the_tree() {
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, sql) in sql_files("engine/sql")
        .into_iter()
        .chain(sql_files("migrations"))
    {
        for f in created_functions(&sql) {
            defined.entry(f).or_default().push(file.clone());
        }
    }
    let twice: Vec<String> = defined
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(f, files)| format!("{f}: {}", files.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "functions defined more than once (keep the one in engine/sql/):\n{}",
        twice.join("\n")
    );
    assert!(
        defined.len() > 60,
        "found only {} functions: is the scan broken?",
        defined.len()
    );
}

#[test]
fn the_embedded_list_is_engine_sql_order_and_covers_every_file() {
    let order = std::fs::read_to_string(repo().join("engine/sql/ORDER")).expect("read ORDER");
    let order: Vec<&str> = order
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let embedded: Vec<&str> = ENGINE_FILES.iter().map(|f| f.name).collect();
    assert_eq!(embedded, order, "engine/sql/ORDER and ENGINE_FILES differ");
    let mut on_disk: Vec<String> = sql_files("engine/sql")
        .into_iter()
        .map(|(name, _)| name.trim_start_matches("engine/sql/").to_owned())
        .collect();
    let mut listed: Vec<String> = order.iter().map(|s| (*s).to_owned()).collect();
    on_disk.sort();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every file of engine/sql/ is applied, and only those"
    );
    for f in ENGINE_FILES {
        let disk = std::fs::read_to_string(repo().join("engine/sql").join(f.name)).unwrap();
        assert_eq!(disk, f.sql, "{} is embedded as it is on disk", f.name);
    }
}

/// Every function of a migrated database comes from the tree (none is left from a step that is
/// gone), and the tree defines nothing the database lacks.
#[tokio::test]
async fn the_database_has_exactly_the_functions_of_the_tree() {
    let db = TestDb::new().await;
    let in_db: Vec<String> = sqlx::query_scalar(
        "SELECT p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public' ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let mut in_tree: Vec<String> = sql_files("engine/sql")
        .into_iter()
        .chain(sql_files("migrations"))
        .flat_map(|(_, sql)| created_functions(&sql))
        .collect();
    in_tree.sort();
    assert_eq!(in_db, in_tree);
}

async fn applied_at(db: &TestDb) -> BTreeMap<String, (String, chrono::DateTime<chrono::Utc>)> {
    sqlx::query_as::<_, (String, String, chrono::DateTime<chrono::Utc>)>(
        "SELECT file, sha256, applied_at FROM engine_sql",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(f, sha, at)| (f, (sha, at)))
    .collect()
}

#[tokio::test]
async fn a_changed_file_is_applied_again_and_an_unchanged_one_is_not() {
    let db = TestDb::new().await;
    let before = applied_at(&db).await;
    assert_eq!(
        before.len(),
        ENGINE_FILES.len(),
        "a migrated database records every file"
    );
    for f in ENGINE_FILES {
        assert_eq!(
            before[f.name].0,
            f.sha256(),
            "{} is recorded as applied",
            f.name
        );
    }

    // Nothing changed: nothing is applied.
    assert!(
        migrate_files(&db.pool, ENGINE_FILES)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(applied_at(&db).await, before);

    // queue.sql changes (a comment is enough: the content hash moved).
    let changed_sql = format!("{}\n-- changed\n", ENGINE_FILES[3].sql);
    let changed: Vec<EngineFile<'_>> = ENGINE_FILES
        .iter()
        .map(|f| match f.name {
            "queue.sql" => EngineFile {
                name: f.name,
                sql: &changed_sql,
            },
            _ => *f,
        })
        .collect();
    assert_eq!(ENGINE_FILES[3].name, "queue.sql");
    let applied = migrate_files(&db.pool, &changed).await.unwrap();
    assert_eq!(applied, ["queue.sql"]);
    let after = applied_at(&db).await;
    for f in ENGINE_FILES {
        if f.name == "queue.sql" {
            assert_eq!(after[f.name].0, changed[3].sha256());
            assert!(
                after[f.name].1 > before[f.name].1,
                "queue.sql was applied again"
            );
        } else {
            assert_eq!(after[f.name], before[f.name], "{} was left alone", f.name);
        }
    }
    let status = engine_file_status(&db.pool).await.unwrap();
    for s in &status {
        let want = if s.file == "queue.sql" {
            EngineFileState::Changed
        } else {
            EngineFileState::Applied
        };
        assert_eq!(s.state, want, "{}", s.file);
    }

    // The binary's own files again: queue.sql differs from the record, so it goes back.
    migrate(&db.pool).await.unwrap();
    let back = applied_at(&db).await;
    assert_eq!(back["queue.sql"].0, ENGINE_FILES[3].sha256());
    assert!(back["queue.sql"].1 > after["queue.sql"].1);
    assert!(
        migrate_files(&db.pool, ENGINE_FILES)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_file_that_fails_leaves_nothing_and_names_itself() {
    let db = TestDb::new().await;
    let before = applied_at(&db).await;
    let broken = format!(
        "CREATE OR REPLACE FUNCTION engine_files_probe() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n\
         {}\nSELECT no_such_function();\n",
        ENGINE_FILES[0].sql
    );
    let files = [EngineFile {
        name: ENGINE_FILES[0].name,
        sql: &broken,
    }];
    let err = migrate_files(&db.pool, &files).await.unwrap_err();
    assert!(err.to_string().contains("kinds.sql"), "{err}");
    assert_eq!(applied_at(&db).await, before, "the record is unchanged");
    let probe: Option<String> = sqlx::query_scalar("SELECT to_regproc('engine_files_probe')::text")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(probe, None, "the file's transaction rolled back");
}

#[tokio::test]
async fn concurrent_migrates_of_an_empty_database_apply_each_file_once() {
    let db = TestDb::empty().await;
    let (a, b) = tokio::join!(
        migrate_files(&db.pool, ENGINE_FILES),
        migrate_files(&db.pool, ENGINE_FILES)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let names: Vec<&str> = ENGINE_FILES.iter().map(|f| f.name).collect();
    assert!(
        (a == names && b.is_empty()) || (b == names && a.is_empty()),
        "one migrate applies every file, the other none: {a:?} / {b:?}"
    );
}
