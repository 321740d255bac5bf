import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { ATTEMPT_BUCKETS_SQL, INVOCATION_COUNTERS_SQL } from "../../shared/catalog/store/listing-stats.js";
import { numberedText } from "../../shared/db/prepared.js";
import { expectIndexReads, inRolledBackTransaction, planNodes, shadowTables } from "../helpers/plans.js";

// The listing stats' two reads are named statements (shared/catalog/store/listing-stats.ts): a pooled
// connection may keep one generic plan for them until the tables are analysed again. A generic plan
// made while the history was small must still read a listing's tail through its indexes once a listing
// has grown to tens of thousands of calls: never read invocations or invocation_attempts whole. The
// generic plan is forced here (the worst case: PostgreSQL picks it by itself once it costs no more than
// the custom ones). Temporary tables (same columns, rules and indexes, no foreign keys) shadow the real
// ones for the transaction.

const SHADOWED = ["invocations", "invocation_attempts", "listing_stats", "listing_attempt_days"];

async function addCalls(trx: Knex.Transaction, listingId: string, count: number, minutesAgo: number) {
  await trx.raw(
    `with i as (
       insert into invocations (listing_id, task, route, input, price_micros, currency, status, payer_address,
                                created_at, completed_at)
       select ?::uuid, 'plan', 'x402', '{}', case when n % 3 = 0 then 0 else 20000 end, 'USDC',
              case when n % 10 = 0 then 'failed' else 'succeeded' end, '0x0000000000000000000000000000000000000001',
              now() - make_interval(mins => ?) + make_interval(secs => n / 100.0),
              now() - make_interval(mins => ?) + make_interval(secs => n / 100.0 + 1)
         from generate_series(1, ?) as n
       returning id, listing_id, status, created_at
     )
     insert into invocation_attempts (invocation_id, attempt_no, listing_id, status, latency_ms, started_at)
     select id, 1, listing_id, status, 100, created_at from i`,
    [listingId, minutesAgo, minutesAgo, count],
  );
}

describe("the listing stats' kept plans", () => {
  it("read a busy listing's tail through the indexes after the history grew past its statistics", async () => {
    const hot = randomUUID();
    const page = [hot, ...Array.from({ length: 19 }, () => randomUUID())];
    await inRolledBackTransaction(async (trx) => {
      await shadowTables(trx, SHADOWED);
      await addCalls(trx, hot, 10, 600);
      for (let i = 0; i < 300; i++) await addCalls(trx, randomUUID(), 10, 600);
      for (const table of SHADOWED) await trx.raw(`analyze ${table}`);
      await trx.raw("set local plan_cache_mode = force_generic_plan");
      await trx.raw(`prepare counters(uuid[]) as ${numberedText(INVOCATION_COUNTERS_SQL).text}`);
      await trx.raw(`prepare buckets(uuid[], uuid[]) as ${numberedText(ATTEMPT_BUCKETS_SQL).text}`);
      // It grows after its statistics were taken (no autovacuum here, or not yet).
      await addCalls(trx, hot, 30_000, 300);

      const ids = `'{${page.join(",")}}'::uuid[]`;
      expectIndexReads(await planNodes(trx, `execute counters(${ids})`), "invocations");
      expectIndexReads(await planNodes(trx, `execute buckets(${ids}, ${ids})`), "invocation_attempts");

      // And the kept plans answer what the statements answer planned afresh.
      const counters = await trx.raw(`execute counters(${ids})`);
      expect(counters.rows).toEqual((await trx.raw(INVOCATION_COUNTERS_SQL, [page])).rows);
      expect(counters.rows).toEqual([expect.objectContaining({ listing_id: hot, total: "30010" })]);
      const buckets = await trx.raw(`execute buckets(${ids}, ${ids})`);
      expect(buckets.rows).toEqual((await trx.raw(ATTEMPT_BUCKETS_SQL, [page, page])).rows);
      await trx.raw("deallocate counters");
      await trx.raw("deallocate buckets");
    });
  });
});
