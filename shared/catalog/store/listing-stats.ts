import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { type ListingStats, NO_STATS } from "../listing-facts.js";

function num(value: unknown): number | null {
  return value === null || value === undefined ? null : Math.round(Number(value) * 10) / 10;
}

/**
 * Counters and latency for a page of listings, computed from invocations and attempts (two grouped
 * queries, whatever the page size). Refunds have no table yet, so refunded_paid_count is exactly 0.
 * "Paid" means paid in USDC: sandbox (tUSDC) calls count as calls, never as paid proof.
 */
export async function readListingStats(q: Db, listingIds: string[]): Promise<Map<string, ListingStats>> {
  const stats = new Map(listingIds.map((id) => [id, { ...NO_STATS }]));
  if (listingIds.length === 0) return stats;
  const [invocations, attempts] = await Promise.all([
    q.raw(
      `select listing_id,
              count(*) as total,
              count(*) filter (where status = 'succeeded') as succeeded,
              count(*) filter (where status = 'failed') as failed,
              count(*) filter (where status = 'succeeded' and price_micros > 0 and currency = 'USDC') as paid_succeeded,
              max(created_at) as last_invoked_at,
              max(completed_at) filter (where status = 'succeeded' and price_micros > 0 and currency = 'USDC')
                as last_paid_success_at
         from invocations where listing_id = any(?::uuid[]) group by listing_id`,
      [listingIds],
    ),
    q.raw(
      `select listing_id,
              count(*) as attempts,
              count(*) filter (where status = 'succeeded') as succeeded,
              avg(latency_ms) filter (where status = 'succeeded') as avg_latency,
              percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'succeeded') as p50,
              percentile_cont(0.95) within group (order by latency_ms) filter (where status = 'succeeded') as p95
         from invocation_attempts
        where listing_id = any(?::uuid[]) and started_at > now() - interval '30 days'
        group by listing_id`,
      [listingIds],
    ),
  ]);
  for (const row of invocations.rows) {
    Object.assign(stats.get(row.listing_id)!, {
      total_invocations: Number(row.total),
      success_count: Number(row.succeeded),
      failure_count: Number(row.failed),
      paid_success_count: Number(row.paid_succeeded),
      last_invoked_at: row.last_invoked_at,
      last_paid_success_at: row.last_paid_success_at,
    });
  }
  for (const row of attempts.rows) {
    Object.assign(stats.get(row.listing_id)!, {
      attempts_30d: Number(row.attempts),
      successful_attempts_30d: Number(row.succeeded),
      avg_latency_ms: num(row.avg_latency),
      p50_latency_ms: num(row.p50),
      p95_latency_ms: num(row.p95),
    });
  }
  return stats;
}

/** Call outcomes over a listing's most recent calls: what ranking needs, at a bounded cost. */
export interface RecentCallStats {
  calls: number;
  succeeded: number;
  p50_latency_ms: number | null;
}

/**
 * The last `window` completed calls (succeeded or failed, within 30 days) of each listing, read through
 * the (listing_id, started_at) index: cost is bounded by the window, not by a listing's history, so
 * ranking stays cheap on the execute hot path however busy a listing has been.
 */
export async function readRecentCallStats(
  q: Db,
  listingIds: string[],
  window: number,
): Promise<Map<string, RecentCallStats>> {
  if (listingIds.length === 0) return new Map();
  const result = await preparedRaw(
    q,
    `select l.id as listing_id, r.calls, r.succeeded, r.p50
       from unnest(?::uuid[]) as l(id)
       cross join lateral (
         select count(*) as calls,
                count(*) filter (where status = 'succeeded') as succeeded,
                percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'succeeded') as p50
           from (select status, latency_ms from invocation_attempts a
                  where a.listing_id = l.id and a.status in ('succeeded', 'failed')
                    and a.started_at > now() - interval '30 days'
                  order by a.started_at desc limit ?) recent
       ) r`,
    [listingIds, window],
  );
  return new Map(
    result.rows.map((row: { listing_id: string; calls: string; succeeded: string; p50: unknown }) => [
      row.listing_id,
      { calls: Number(row.calls), succeeded: Number(row.succeeded), p50_latency_ms: num(row.p50) },
    ]),
  );
}
