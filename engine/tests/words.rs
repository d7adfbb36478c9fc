//! The database's words (`converge_engine::words`) against the database that defines them:
//! each CHECK constraint of the migrated schema allows exactly its set's words, the generated
//! `phase` column derives exactly the phases, the engine's SQL queues only task types and
//! triggers the sets know, and an apply's three answers decode. A word added on one side
//! only fails here, not as a decode error in a running broker.

use std::{collections::BTreeSet, path::Path};

use converge_engine::{
    db,
    testing::TestDb,
    words::{ApplyResult, MemberRole, OperationState, Phase, TaskTrigger, TaskType, Transition},
};
use serde_json::json;

/// Every `'word'` quoted in `text` (SQL literals as `pg_get_constraintdef` and `pg_get_expr`
/// print them, `'word'::text`).
fn quoted(text: &str) -> BTreeSet<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn set(words: &[&str]) -> BTreeSet<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The words the CHECK constraint on `table.column` allows.
async fn check_words(pool: &sqlx::PgPool, table: &str, column: &str) -> BTreeSet<String> {
    let defs: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
         WHERE c.conrelid = $1::regclass AND c.contype = 'c'",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let mine: Vec<&String> = defs
        .iter()
        .filter(|d| d.contains(&format!("({column} = ANY")))
        .collect();
    assert_eq!(mine.len(), 1, "one CHECK of {table}.{column} in {defs:?}");
    quoted(mine[0])
}

#[tokio::test]
async fn each_check_constraint_allows_exactly_its_words() {
    let db = TestDb::new().await;
    let queued: Vec<&str> = TaskType::ALL
        .iter()
        .filter(|t| t.is_queued())
        .map(|t| t.as_str())
        .collect();
    for (table, column, words) in [
        ("work_queue", "task_type", queued.as_slice()),
        ("reactor_bindings", "transition", Transition::TEXTS),
        ("resource_operations", "state", OperationState::TEXTS),
        ("cluster_members", "role", MemberRole::TEXTS),
    ] {
        assert_eq!(
            check_words(&db.pool, table, column).await,
            set(words),
            "{table}.{column}"
        );
    }
}

#[tokio::test]
async fn the_phase_column_derives_exactly_the_phases() {
    let db = TestDb::new().await;
    let expr: String = sqlx::query_scalar(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = 'resources'::regclass AND a.attname = 'phase'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    // The CASE's words, less the literals it compares against ('infinity').
    let mut words = quoted(&expr);
    words.remove("infinity");
    assert_eq!(words, set(Phase::TEXTS), "{expr}");
}

/// The statements of the engine's SQL that insert into `work_queue`, each up to its `;`.
fn queue_inserts() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sql") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Comments out, so prose quoting a word is not taken for one written.
        let text: String = text
            .lines()
            .map(|l| l.split("--").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for (at, _) in text.match_indices("INSERT INTO work_queue") {
            let end = text[at..].find(';').map_or(text.len(), |e| at + e);
            out.push(text[at..end].to_owned());
        }
    }
    out
}

#[test]
fn the_engine_queues_only_task_types_and_triggers_it_knows() {
    let inserts = queue_inserts();
    assert!(inserts.len() >= 5, "found {} queue inserts", inserts.len());
    let (mut types, mut triggers) = (BTreeSet::new(), BTreeSet::new());
    for statement in &inserts {
        for word in quoted(statement) {
            if let Some(t) = TaskType::parse(&word) {
                types.insert(t);
            } else if let Some(t) = TaskTrigger::parse(&word) {
                triggers.insert(t);
            } else {
                assert_eq!(word, "-infinity", "an unknown word in {statement}");
            }
        }
    }
    let queued: BTreeSet<TaskType> = TaskType::ALL
        .iter()
        .copied()
        .filter(|t| t.is_queued())
        .collect();
    assert_eq!(types, queued);
    // Every trigger but the broker's own (a reactor delivery is never a queue row) is queued
    // by some statement: none is dead.
    let all_but_reactor: BTreeSet<TaskTrigger> = TaskTrigger::ALL
        .iter()
        .copied()
        .filter(|t| *t != TaskTrigger::Reactor)
        .collect();
    assert_eq!(triggers, all_but_reactor);
}

#[tokio::test]
async fn an_apply_answers_each_apply_result() {
    let db = TestDb::new().await;
    let manifest = json!({"kind": "leaf", "kind_version": 1,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
    db::kinds::manifest_put(&db.pool, "leaf", 1, &manifest)
        .await
        .unwrap();
    let apply = |spec: serde_json::Value| {
        let pool = db.pool.clone();
        async move {
            db::resources::resource_apply(&pool, None, "leaf", 1, "a", &spec, &json!({}), None)
                .await
                .unwrap()
                .result
        }
    };
    assert_eq!(apply(json!({"n": 1})).await, ApplyResult::Created);
    assert_eq!(apply(json!({"n": 1})).await, ApplyResult::Unchanged);
    assert_eq!(apply(json!({"n": 2})).await, ApplyResult::Configured);
}
