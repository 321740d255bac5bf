import type { Db } from "../db/knex.js";
import { preparedRaw } from "../db/prepared.js";

export interface OutboxRow {
  id: string;
  queue: string;
  job_id: string;
  payload: Record<string, unknown>;
  created_at: Date;
  enqueued_at: Date | null;
}

/**
 * Marks rows sent. Deliberately not filtered on "enqueued_at is null": that steers the planner onto the
 * partial unsent index, which is full of dead entries under churn; the unique (queue, job_id) index is
 * exact, and coalesce keeps the first send time. One named statement whatever the batch's size (the ids
 * as one array): an `in (…)` list was a new text, parsed and planned, for every size of batch.
 *
 * Its transaction commits without waiting for the WAL flush (synchronous_commit off, set for this
 * transaction only by the statement itself): a mark lost in a database crash only makes the sweeper send
 * a job again, which is harmless (job ids are row ids; a finished invocation's run ends at once), and the
 * flush it spares is one the execute path's own commits would otherwise queue behind. Inside the
 * sweeper's transaction the same holds for the whole transaction.
 */
export async function markOutboxSent(q: Db, queue: string, jobIds: string[]): Promise<void> {
  if (jobIds.length === 0) return;
  await preparedRaw(
    q,
    `update job_outbox set enqueued_at = coalesce(enqueued_at, now())
       from (select set_config('synchronous_commit', 'off', true)) as async_commit
      where queue = ? and job_id = any(?::text[])`,
    [queue, jobIds],
  );
}

/** Unsent rows of known queues older than the given age, locked so two sweepers never send one row at once. */
export async function lockUnsentOutbox(
  q: Db,
  queues: readonly string[],
  olderThanMs: number,
  limit: number,
): Promise<OutboxRow[]> {
  return q<OutboxRow>("job_outbox")
    .whereNull("enqueued_at")
    .whereIn("queue", queues)
    .andWhere("created_at", "<", q.raw("now() - make_interval(secs => ?)", [olderThanMs / 1000]))
    .orderBy("created_at")
    .limit(limit)
    .forUpdate()
    .skipLocked();
}

/** Sent rows are kept a day for inspection, then deleted. */
export async function deleteSentOutbox(q: Db, olderThanHours: number): Promise<number> {
  return q("job_outbox")
    .whereNotNull("enqueued_at")
    .andWhere("enqueued_at", "<", q.raw("now() - make_interval(hours => ?)", [olderThanHours]))
    .delete();
}
