import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { histogramPercentile } from "../latency-histogram.js";
import { type ListingStats, NO_STATS } from "../listing-facts.js";
import { ATTEMPT_BUCKET_SQL, foldListingStats } from "./listing-stats-fold.js";

function num(value: unknown): number | null {
  return value === null || value === undefined ? null : Math.round(Number(value) * 10) / 10;
}

/** A listing whose live tail (invocations past its watermark) reaches this many rows is folded. */
export const FOLD_AFTER_TAIL_ROWS = 200;

const PAID = "status = 'succeeded' and price_micros > 0 and currency = 'USDC'";

/**
 * Counters and latency for a page of listings: the folded part (listing_stats, listing_attempt_days)
 * plus the live tail past each listing's watermark, read through the (listing_id, created_at) and
 * (listing_id, started_at) indexes and the primary key (rows open at the last fold), so the cost is the
 * tail's, not the history's. Counters are exact; p50/p95 come from a log histogram (±4.5 %, see
 * latency-histogram.ts). A listing whose tail has grown past FOLD_AFTER_TAIL_ROWS is folded afterwards.
 * Refunds have no table yet, so refunded_paid_count is exactly 0. "Paid" means paid in USDC: sandbox
 * (tUSDC) calls count as calls, never as paid proof. Both reads are named statements (prepared.ts):
 * planning them was a third of a page's time (test/catalog/listing-stats-plan.test.ts checks the plan a
 * connection keeps).
 */
export async function readListingStats(q: Db, listingIds: string[]): Promise<Map<string, ListingStats>> {
  const stats = new Map(listingIds.map((id) => [id, { ...NO_STATS }]));
  if (listingIds.length === 0) return stats;
  const [invocations, attempts] = await Promise.all([
    readInvocationCounters(q, listingIds),
    readAttemptBuckets(q, listingIds),
  ]);
  const toFold: string[] = [];
  for (const row of invocations) {
    Object.assign(stats.get(row.listing_id)!, {
      total_invocations: Number(row.total),
      success_count: Number(row.succeeded),
      failure_count: Number(row.failed),
      paid_success_count: Number(row.paid_succeeded),
      last_invoked_at: row.last_invoked_at,
      last_paid_success_at: row.last_paid_success_at,
    });
    if (Number(row.tail_rows) >= FOLD_AFTER_TAIL_ROWS) toFold.push(row.listing_id);
  }
  for (const [listingId, buckets] of attempts) {
    let all = 0;
    let succeeded = 0;
    let timed = 0;
    let latencySum = 0;
    const histogram = new Map<number, number>();
    for (const b of buckets) {
      all += b.attempts;
      if (b.bucket !== -1) succeeded += b.attempts;
      if (b.bucket >= 0) {
        timed += b.attempts;
        latencySum += b.latency_sum;
        histogram.set(b.bucket, b.attempts);
      }
    }
    Object.assign(stats.get(listingId)!, {
      attempts_30d: all,
      successful_attempts_30d: succeeded,
      avg_latency_ms: timed > 0 ? num(latencySum / timed) : null,
      p50_latency_ms: num(histogramPercentile(histogram, 0.5)),
      p95_latency_ms: num(histogramPercentile(histogram, 0.95)),
    });
  }
  for (const listingId of toFold) await foldListingStats(q, listingId);
  return stats;
}

interface CounterRow {
  listing_id: string;
  total: string;
  succeeded: string;
  failed: string;
  paid_succeeded: string;
  last_invoked_at: Date | null;
  last_paid_success_at: Date | null;
  tail_rows: string;
}

/**
 * Folded counters + the invocations created since the watermark + those open at the last fold. Its one
 * binding is the page's listing ids (exported for the plan test).
 */
export const INVOCATION_COUNTERS_SQL = `select l.id as listing_id,
        coalesce(s.total_invocations, 0) + t.total as total,
        coalesce(s.success_count, 0) + t.succeeded as succeeded,
        coalesce(s.failure_count, 0) + t.failed as failed,
        coalesce(s.paid_success_count, 0) + t.paid_succeeded as paid_succeeded,
        greatest(s.last_invoked_at, t.last_invoked_at) as last_invoked_at,
        greatest(s.last_paid_success_at, t.last_paid_success_at) as last_paid_success_at,
        t.total as tail_rows
   from unnest(?::uuid[]) as l(id)
   left join listing_stats s on s.listing_id = l.id
   cross join lateral (
     select count(*) as total,
            count(*) filter (where status = 'succeeded') as succeeded,
            count(*) filter (where status = 'failed') as failed,
            count(*) filter (where ${PAID}) as paid_succeeded,
            max(created_at) as last_invoked_at,
            max(completed_at) filter (where ${PAID}) as last_paid_success_at
       from (select status, price_micros, currency, created_at, completed_at from invocations i
              where i.listing_id = l.id and i.created_at >= coalesce(s.folded_before, '-infinity')
             union all
             select status, price_micros, currency, created_at, completed_at from invocations i
              where i.id = any(s.pending_invocation_ids) and i.created_at < s.folded_before) tail
   ) t
  where s.listing_id is not null or t.total > 0`;

async function readInvocationCounters(q: Db, listingIds: string[]): Promise<CounterRow[]> {
  return (await preparedRaw(q, INVOCATION_COUNTERS_SQL, [listingIds])).rows as CounterRow[];
}

interface BucketRow {
  bucket: number;
  attempts: number;
  latency_sum: number;
}

const LIVE_ATTEMPTS = `select ${ATTEMPT_BUCKET_SQL} as bucket, latency_ms, status from invocation_attempts a`;

/**
 * Attempts started in the last 30 days by latency bucket: folded days after the cut-off's UTC day,
 * plus, read live, the folded attempts of the cut-off day still inside the window and the tail. Its two
 * bindings are the page's listing ids, twice (exported for the plan test).
 */
export const ATTEMPT_BUCKETS_SQL = `with cut as (select now() - interval '30 days' as at,
                     ((now() - interval '30 days') at time zone 'UTC')::date as day)
 select listing_id, bucket::int as bucket, sum(attempts)::float8 as attempts,
        sum(latency_sum)::float8 as latency_sum
   from (select d.listing_id, d.bucket, d.attempts, d.latency_sum_ms as latency_sum
           from listing_attempt_days d, cut
          where d.listing_id = any(?::uuid[]) and d.day > cut.day
         union all
         select l.id, x.bucket, count(*), coalesce(sum(x.latency_ms) filter (where x.status = 'succeeded'), 0)
           from unnest(?::uuid[]) as l(id)
           cross join cut
           left join listing_stats s on s.listing_id = l.id
           cross join lateral (
             ${LIVE_ATTEMPTS}
              where s.listing_id is not null and a.listing_id = l.id and a.started_at > cut.at
                and a.started_at < least(((cut.day + 1)::timestamp at time zone 'UTC'), s.folded_before)
                and not (a.id = any(s.pending_attempt_ids))
             union all
             ${LIVE_ATTEMPTS}
              where a.listing_id = l.id and a.started_at > cut.at
                and a.started_at >= coalesce(s.folded_before, '-infinity')
             union all
             ${LIVE_ATTEMPTS}
              where a.id = any(s.pending_attempt_ids) and a.started_at > cut.at
                and a.started_at < s.folded_before
           ) x
          group by l.id, x.bucket) parts
  group by listing_id, bucket`;

async function readAttemptBuckets(q: Db, listingIds: string[]): Promise<Map<string, BucketRow[]>> {
  const result = await preparedRaw(q, ATTEMPT_BUCKETS_SQL, [listingIds, listingIds]);
  const byListing = new Map<string, BucketRow[]>();
  for (const row of result.rows as (BucketRow & { listing_id: string })[]) {
    const list = byListing.get(row.listing_id) ?? [];
    list.push({ bucket: row.bucket, attempts: row.attempts, latency_sum: row.latency_sum });
    byListing.set(row.listing_id, list);
  }
  return byListing;
}

/** Call outcomes over a listing's most recent calls: what ranking needs, at a bounded cost. */
export interface RecentCallStats {
  calls: number;
  succeeded: number;
  p50_latency_ms: number | null;
}

interface RecentCallsRow {
  listing_id: string;
  calls: string;
  succeeded: string;
  p50: unknown;
}

/** The recent-calls read of readRecentCallStats (exported for the plan test). */
export const RECENT_CALLS_SQL = `select l.id as listing_id, r.calls, r.succeeded, r.p50
       from unnest(?::uuid[]) as l(id)
       cross join lateral (
         select count(*) as calls,
                count(*) filter (where status = 'succeeded') as succeeded,
                percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'succeeded') as p50
           from (select status, latency_ms from invocation_attempts a
                  where a.listing_id = l.id and a.status in ('succeeded', 'failed')
                    and a.started_at > now() - interval '30 days'
                  order by a.started_at desc limit ?) recent
       ) r`;

/**
 * Makes the rest of a transaction plan the recent-calls read as the walk it must be: no bitmap scan,
 * no sort. The planner estimates each listing's rows from the lateral parameter, so as the average
 * listing, or from statistics older than the table's growth; either way a busy listing can look like
 * a few rows, and it then chose a bitmap scan of the listing's whole history and a sort of it (120–160 ms
 * for a listing of 200,000 attempts, once a second, against 0.4 ms for the walk: docs/benchmarks.md
 * "The sixth round"). With both off the only plan left is the index walk backwards, which stops after
 * `window` rows however the estimate goes.
 */
export async function recentCallsPlanSettings(trx: Knex.Transaction): Promise<void> {
  await trx.raw(
    "select set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)",
  );
}

/**
 * The last `window` completed calls (succeeded or failed, within 30 days) of each listing, read through
 * the (listing_id, started_at) index backwards: cost is bounded by the window, not by a listing's history,
 * so ranking stays cheap however busy a listing has been. Planned on every read (an unnamed statement)
 * under recentCallsPlanSettings, in a transaction of its own (q is the pool, never a transaction: the
 * settings would last to that transaction's end); the routing cache reads it at most once a second per
 * process (shared/routing/ranking-stats.ts).
 */
export async function readRecentCallStats(
  q: Db,
  listingIds: string[],
  window: number,
): Promise<Map<string, RecentCallStats>> {
  if (listingIds.length === 0) return new Map();
  const result = await q.transaction(async (trx) => {
    await recentCallsPlanSettings(trx);
    return (await trx.raw(RECENT_CALLS_SQL, [listingIds, window])) as { rows: RecentCallsRow[] };
  });
  return new Map(
    result.rows.map((row) => [
      row.listing_id,
      { calls: Number(row.calls), succeeded: Number(row.succeeded), p50_latency_ms: num(row.p50) },
    ]),
  );
}
