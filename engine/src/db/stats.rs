//! Estimates from PostgreSQL's statistics, for the metrics a scrape reads
//! ([`crate::metrics`]): never a count over a table, whatever its size.

use sqlx::PgPool;

/// Rows in the queue and the outbox, estimated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueEstimates {
    /// Rows in `work_queue` (due, backing off or leased).
    pub queue: i64,
    /// Rows in `work_outbox` (results waiting for a drainer).
    pub outbox: i64,
}

/// The live-row counts PostgreSQL keeps for the partitions of `work_queue` and
/// `work_outbox`, summed per table.
///
/// Why this and not `count(*)`: a count reads every row of a queue that may hold a million,
/// on every scrape. `pg_stat_get_live_tuples` reads a counter the server keeps in shared
/// memory (inserts minus deletes, flushed by each backend within a second or so of its
/// commit), and `pg_inherits` has a row per partition of the database (a page): 32
/// counter lookups and no page of either table read, the same cost at any size (0.2 ms
/// measured). The price is an
/// estimate: a few seconds behind, reset with the statistics (`pg_stat_reset`, or a crash,
/// which empties these UNLOGGED tables anyway). `pg_class.reltuples` would be cheaper still
/// but moves only when (auto)vacuum or analyze runs, minutes behind a busy queue.
pub async fn queue_estimates(pool: &PgPool) -> sqlx::Result<QueueEstimates> {
    let (queue, outbox): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(pg_stat_get_live_tuples(i.inhrelid))
                             FILTER (WHERE i.inhparent = 'work_queue'::regclass), 0)::bigint,
                coalesce(sum(pg_stat_get_live_tuples(i.inhrelid))
                             FILTER (WHERE i.inhparent = 'work_outbox'::regclass), 0)::bigint
         FROM pg_inherits i
         WHERE i.inhparent IN ('work_queue'::regclass, 'work_outbox'::regclass)",
    )
    .fetch_one(pool)
    .await?;
    Ok(QueueEstimates { queue, outbox })
}
