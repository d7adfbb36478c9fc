//! The per-test database helper: every `TestDb` is a fresh, fully migrated database of its own.

use converge_engine::testing::TestDb;

async fn has_resources_table(db: &TestDb) -> bool {
    sqlx::query_scalar("SELECT to_regclass('public.resources') IS NOT NULL")
        .fetch_one(&db.pool)
        .await
        .expect("look up the resources table")
}

#[tokio::test]
async fn test_databases_are_migrated_and_isolated() {
    let (a, b) = tokio::join!(TestDb::new(), TestDb::new());
    assert_ne!(a.name(), b.name());
    assert_ne!(a.url, b.url);
    assert!(
        has_resources_table(&a).await,
        "{} is not migrated",
        a.name()
    );
    assert!(
        has_resources_table(&b).await,
        "{} is not migrated",
        b.name()
    );

    sqlx::query("CREATE TABLE only_in_a (id int)")
        .execute(&a.pool)
        .await
        .expect("create table in a");
    let in_b: bool = sqlx::query_scalar("SELECT to_regclass('public.only_in_a') IS NOT NULL")
        .fetch_one(&b.pool)
        .await
        .expect("look up table in b");
    assert!(
        !in_b,
        "a table created in one test database is visible in another"
    );

    let current: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&a.pool)
        .await
        .expect("current_database");
    assert_eq!(current, a.name());
}

#[tokio::test]
async fn dropping_a_test_database_removes_it() {
    let db = TestDb::new().await;
    let name = db.name().to_owned();
    let keeper = TestDb::new().await;
    drop(db);
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&keeper.pool)
            .await
            .expect("look up database");
    assert!(!exists, "{name} was not dropped");
}
