import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { bucketSql } from "../latency-histogram.js";

/** An attempt's bucket in listing_attempt_days: -1 not succeeded, -2 succeeded without a latency. */
export const ATTEMPT_BUCKET_SQL = `case when status <> 'succeeded' then -1 when latency_ms is null then -2
                                        else ${bucketSql("latency_ms")} end`;

const FINAL = "status in ('succeeded', 'failed')";
const PAID = "status = 'succeeded' and price_micros > 0 and currency = 'USDC'";

/** Reads of the watermark before a fold gives up on a backend whose transaction it cannot date. */
const WATERMARK_READS = 3;

/**
 * The newest watermark a fold may use: every invocation or attempt created before it is committed (or
 * rolled back) and visible to the statements that follow. created_at and started_at are now() of the
 * writing transaction, its start, so a row still uncommitted was stamped no earlier than the start of
 * the oldest open transaction. Null when that cannot be known: an open transaction of another role
 * whose start this role may not see, or a prepared transaction.
 *
 * pg_locks is read live but pg_stat_activity from a snapshot, so a transaction that starts or ends while
 * the statement runs can show as a lock with no start; that passes, so such a read is made again (with a
 * fresh snapshot) before the fold gives up.
 */
async function safeWatermark(trx: Knex.Transaction): Promise<Date | null> {
  for (let read = 1; ; read++) {
    const result = await trx.raw(
      `select least(clock_timestamp(),
                    (select min(a.xact_start) from pg_stat_activity a
                      where a.backend_type = 'client backend' and a.pid <> pg_backend_pid()
                        and a.datname = current_database())) as watermark,
              (select count(*) from pg_locks l join pg_stat_activity a on a.pid = l.pid
                where l.locktype = 'virtualxid' and l.granted and a.pid <> pg_backend_pid()
                  and a.backend_type = 'client backend' and a.xact_start is null
                  and a.datname = current_database())
            + (select count(*) from pg_prepared_xacts where database = current_database()) as unknown`,
    );
    const row = result.rows[0] as { watermark: Date; unknown: string };
    if (Number(row.unknown) === 0) return row.watermark;
    if (read >= WATERMARK_READS) return null;
    await trx.raw("select pg_stat_clear_snapshot()");
  }
}

/**
 * Folds a listing's tail into listing_stats and listing_attempt_days: the invocations and attempts
 * created since its watermark, and those open at the last fold. Finished ones are added to the
 * counters (finished rows never change again); open ones are kept as ids to look at next time. Runs
 * under a per-listing advisory lock (a busy lock means another process is folding it: skipped) and
 * never touches the invocation rows, so it adds no wait to the execute path. Returns whether it folded.
 */
export async function foldListingStats(q: Db, listingId: string): Promise<boolean> {
  return q.transaction(async (trx) => {
    const lock = await trx.raw(
      "select pg_try_advisory_xact_lock(hashtext('listing_stats'), hashtext(?::text)) as locked",
      [listingId],
    );
    if (!lock.rows[0].locked) return false;
    const watermark = await safeWatermark(trx);
    if (watermark === null) return false;
    const previous = (await trx("listing_stats")
      .where({ listing_id: listingId })
      .first("folded_before", "pending_invocation_ids", "pending_attempt_ids")) as
      | { folded_before: Date; pending_invocation_ids: string[]; pending_attempt_ids: string[] }
      | undefined;
    if (previous && watermark <= previous.folded_before) return false;
    const since = previous?.folded_before ?? "-infinity";
    const pendingAttempts = await foldAttempts(
      trx,
      listingId,
      since,
      watermark,
      previous?.pending_attempt_ids ?? [],
    );
    await foldInvocations(
      trx,
      listingId,
      since,
      watermark,
      previous?.pending_invocation_ids ?? [],
      pendingAttempts,
    );
    // Days before the 30-day window's first day are never read again.
    await trx("listing_attempt_days")
      .where({ listing_id: listingId })
      .andWhereRaw("day < ((now() - interval '31 days') at time zone 'UTC')::date")
      .delete();
    return true;
  });
}

/** Adds finished attempts to their day and bucket; returns the ids of the attempts still running. */
async function foldAttempts(
  trx: Knex.Transaction,
  listingId: string,
  since: Date | "-infinity",
  watermark: Date,
  pending: string[],
): Promise<string[]> {
  const result = await trx.raw(
    `with r as (
       select id, status, latency_ms, started_at from invocation_attempts
        where listing_id = ? and started_at >= ? and started_at < ?
       union all
       select id, status, latency_ms, started_at from invocation_attempts
        where id = any(?::uuid[]) and started_at < ?
     ), folded as (
       insert into listing_attempt_days (listing_id, day, bucket, attempts, latency_sum_ms)
       select ?, (started_at at time zone 'UTC')::date, ${ATTEMPT_BUCKET_SQL}, count(*),
              coalesce(sum(latency_ms) filter (where status = 'succeeded'), 0)
         from r where status <> 'running'
        group by 2, 3
       on conflict (listing_id, day, bucket) do update
          set attempts = listing_attempt_days.attempts + excluded.attempts,
              latency_sum_ms = listing_attempt_days.latency_sum_ms + excluded.latency_sum_ms
     )
     select coalesce(array_agg(id::text) filter (where status = 'running'), '{}') as pending from r`,
    [listingId, since, watermark, pending, since, listingId],
  );
  return result.rows[0].pending as string[];
}

/** Adds finished invocations to the listing's counters and moves its watermark. */
async function foldInvocations(
  trx: Knex.Transaction,
  listingId: string,
  since: Date | "-infinity",
  watermark: Date,
  pending: string[],
  pendingAttempts: string[],
): Promise<void> {
  await trx.raw(
    `with r as (
       select id, status, price_micros, currency, created_at, completed_at from invocations
        where listing_id = ? and created_at >= ? and created_at < ?
       union all
       select id, status, price_micros, currency, created_at, completed_at from invocations
        where id = any(?::uuid[]) and created_at < ?
     ), agg as (
       select count(*) filter (where ${FINAL}) as total,
              count(*) filter (where status = 'succeeded') as succeeded,
              count(*) filter (where status = 'failed') as failed,
              count(*) filter (where ${PAID}) as paid_succeeded,
              max(created_at) filter (where ${FINAL}) as last_invoked_at,
              max(completed_at) filter (where ${PAID}) as last_paid_success_at,
              coalesce(array_agg(id) filter (where not ${FINAL}), '{}') as pending
         from r
     )
     insert into listing_stats (listing_id, folded_before, pending_invocation_ids, pending_attempt_ids,
                                total_invocations, success_count, failure_count, paid_success_count,
                                last_invoked_at, last_paid_success_at, updated_at)
     select ?, ?, pending, ?::uuid[], total, succeeded, failed, paid_succeeded, last_invoked_at,
            last_paid_success_at, now()
       from agg
     on conflict (listing_id) do update
        set folded_before = excluded.folded_before,
            pending_invocation_ids = excluded.pending_invocation_ids,
            pending_attempt_ids = excluded.pending_attempt_ids,
            total_invocations = listing_stats.total_invocations + excluded.total_invocations,
            success_count = listing_stats.success_count + excluded.success_count,
            failure_count = listing_stats.failure_count + excluded.failure_count,
            paid_success_count = listing_stats.paid_success_count + excluded.paid_success_count,
            last_invoked_at = greatest(listing_stats.last_invoked_at, excluded.last_invoked_at),
            last_paid_success_at = greatest(listing_stats.last_paid_success_at, excluded.last_paid_success_at),
            updated_at = now()`,
    [listingId, since, watermark, pending, since, listingId, watermark, pendingAttempts],
  );
}
