import type { Knex } from "knex";
import { readListingStats } from "../../shared/catalog/index.js";
import type { Scenario } from "./scenarios.js";
import { log } from "./settings.js";

// The listing counters (the stats of a listing page) over a large invocation history: 200,000 keyless
// invocations with one attempt each, over 60 days, on 5 hot listings. A page is 5 hot listings and 15
// quiet ones, read with the folded counters (what the service does) and with the full aggregation
// every read ran before they were folded (for comparison).

export const HISTORY = 200_000;
const HOT = 5;

/** Seeds the history once (kept with the listings); answers the pages of listing ids to read. */
export async function seedHistory(knex: Knex): Promise<string[][]> {
  const hot = (
    await knex.raw("select id from listings where status = 'active' order by md5(slug) limit ?", [HOT])
  ).rows.map((r: { id: string }) => r.id) as string[];
  const quiet = (
    await knex.raw("select id from listings where status = 'active' order by md5(slug) offset ? limit 60", [
      HOT,
    ])
  ).rows.map((r: { id: string }) => r.id) as string[];
  const have = Number((await knex.raw("select count(*) as n from invocations")).rows[0].n);
  if (have < HISTORY) {
    log(`seeding ${HISTORY.toLocaleString("en")} invocations on ${HOT} listings…`);
    await knex.raw(
      `with i as (
         insert into invocations (listing_id, task, route, input, price_micros, currency, status, payer_address,
                                  created_at, completed_at)
         select (?::uuid[])[1 + g % ?], 'bench', 'x402', '{}', case when g % 3 = 0 then 0 else 20000 end, 'USDC',
                case when g % 10 = 0 then 'failed' else 'succeeded' end, '0x0000000000000000000000000000000000000001',
                now() - (g * interval '60 days' / ?), now() - (g * interval '60 days' / ?) + interval '1 second'
           from generate_series(1, ?) as g
         returning id, listing_id, status, created_at
       )
       insert into invocation_attempts (invocation_id, attempt_no, listing_id, status, latency_ms, started_at,
                                        finished_at)
       select id, 1, listing_id, status, (50 + random() * 2000)::int, created_at, created_at + interval '1 second'
         from i`,
      [hot, HOT, HISTORY, HISTORY, HISTORY],
    );
  }
  return [0, 1, 2].map((p) => [...hot, ...quiet.slice(p * 15, p * 15 + 15)]);
}

export function statsScenario(pages: string[][]): Scenario {
  return {
    name: "listing stats, page of 20 (5 hot)",
    queries: pages.map((_, i) => String(i)),
    async call(knex, page) {
      const stats = await readListingStats(knex, pages[Number(page)]!);
      return { rows: stats.size, total: [...stats.values()].reduce((n, s) => n + s.total_invocations, 0) };
    },
  };
}

export function fullAggregationScenario(pages: string[][]): Scenario {
  return {
    name: "listing stats, full aggregation (before)",
    queries: pages.map((_, i) => String(i)),
    async call(knex, page) {
      const ids = pages[Number(page)]!;
      const [inv] = await Promise.all([
        knex.raw(
          `select listing_id, count(*) as total, count(*) filter (where status = 'succeeded') as succeeded,
                  count(*) filter (where status = 'failed') as failed,
                  count(*) filter (where status = 'succeeded' and price_micros > 0 and currency = 'USDC') as paid,
                  max(created_at), max(completed_at) filter (where status = 'succeeded' and price_micros > 0)
             from invocations where listing_id = any(?::uuid[]) group by listing_id`,
          [ids],
        ),
        knex.raw(
          `select listing_id, count(*), count(*) filter (where status = 'succeeded'),
                  avg(latency_ms) filter (where status = 'succeeded'),
                  percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'succeeded'),
                  percentile_cont(0.95) within group (order by latency_ms) filter (where status = 'succeeded')
             from invocation_attempts where listing_id = any(?::uuid[]) and started_at > now() - interval '30 days'
            group by listing_id`,
          [ids],
        ),
      ]);
      const total = inv.rows.reduce((n: number, r: { total: string }) => n + Number(r.total), 0);
      return { rows: ids.length, total };
    },
  };
}
