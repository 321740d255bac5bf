import type { Db } from "../db/knex.js";

export interface MarketCounts {
  agents: number;
  listings_active: number;
  invocations_total: number;
  invocations_succeeded: number;
  invocations_failed: number;
  invocations_in_progress: number;
  invocations_awaiting_approval: number;
  receipts: number;
}

/** Live counts for /api/stats, read in one round trip. */
export async function readMarketCounts(q: Db): Promise<MarketCounts> {
  const result = await q.raw(`
    select
      (select count(*) from agents) as agents,
      (select count(*) from listings where status = 'active') as listings_active,
      (select count(*) from invocations) as invocations_total,
      (select count(*) from invocations where status = 'succeeded') as invocations_succeeded,
      (select count(*) from invocations where status = 'failed') as invocations_failed,
      (select count(*) from invocations where status in ('queued','running')) as invocations_in_progress,
      (select count(*) from invocations where status = 'awaiting_approval') as invocations_awaiting_approval,
      (select count(*) from receipts) as receipts`);
  const row = result.rows[0] as Record<keyof MarketCounts, string>;
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as MarketCounts;
}

export async function pingDb(q: Db): Promise<void> {
  await q.raw("select 1");
}
