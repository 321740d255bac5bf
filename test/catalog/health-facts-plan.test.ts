import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { HEALTH_DAYS_SQL, LATEST_PROBES_SQL } from "../../shared/catalog/store/health-probes.js";
import { SELLERS_SQL } from "../../shared/catalog/store/sellers.js";
import { numberedText } from "../../shared/db/prepared.js";
import { expectIndexReads, inRolledBackTransaction, planNodes, shadowTables } from "../helpers/plans.js";

// A catalog page's health and seller reads are named statements (shared/catalog/store/health-probes.ts,
// sellers.ts): a pooled connection may keep one generic plan for each until the tables are analysed
// again. Plans made while the tables were small must still read by index once they have grown: a busy
// listing's probes, a big catalog's probe days, many agents. The generic plan is forced here (the worst
// case: PostgreSQL picks it by itself once it costs no more than the custom ones). Temporary tables
// (same columns, rules and indexes, no foreign keys) shadow the real ones for the transaction.

const SHADOWED = ["agents", "health_probes", "health_probe_days"];

async function addProbes(trx: Knex.Transaction, listingId: string, count: number) {
  await trx.raw(
    `insert into health_probes (listing_id, ok, http_status, probed_at)
     select ?::uuid, n % 7 <> 0, 200, now() - make_interval(secs => n) from generate_series(1, ?) as n`,
    [listingId, count],
  );
}

async function addProbeDays(trx: Knex.Transaction, listings: number) {
  await trx.raw(
    `insert into health_probe_days (listing_id, day, probes, ok_probes)
     select l.id, (now() at time zone 'utc')::date - d, 288, 280
       from (select gen_random_uuid() as id from generate_series(1, ?)) l, generate_series(0, 29) as d`,
    [listings],
  );
}

async function addAgents(trx: Knex.Transaction, count: number) {
  await trx.raw(
    `insert into agents (name, intent, signing_public_key)
     select 'seller ' || n, 'seller', 'key' from generate_series(1, ?) as n`,
    [count],
  );
}

describe("a catalog page's kept health and seller plans", () => {
  it("read by index after the tables grew past their statistics, and answer what a fresh plan answers", async () => {
    const hot = randomUUID();
    const page = [hot, ...Array.from({ length: 19 }, () => randomUUID())];
    await inRolledBackTransaction(async (trx) => {
      await shadowTables(trx, SHADOWED);
      await addProbes(trx, hot, 5);
      for (const id of page.slice(1, 5)) await addProbes(trx, id, 3);
      await addProbeDays(trx, 10);
      await trx.raw(
        `insert into health_probe_days (listing_id, day, probes, ok_probes)
         values (?, (now() at time zone 'utc')::date, 10, 9), (?, (now() at time zone 'utc')::date - 9, 5, 5)`,
        [hot, hot],
      );
      await addAgents(trx, 10);
      for (const table of SHADOWED) await trx.raw(`analyze ${table}`);
      await trx.raw("set local plan_cache_mode = force_generic_plan");
      await trx.raw(`prepare days(uuid[]) as ${numberedText(HEALTH_DAYS_SQL).text}`);
      await trx.raw(`prepare latest(uuid[]) as ${numberedText(LATEST_PROBES_SQL).text}`);
      await trx.raw(`prepare sellers(uuid[]) as ${numberedText(SELLERS_SQL).text}`);
      // The tables grow after their statistics were taken (no autovacuum here, or not yet).
      await addProbes(trx, hot, 30_000);
      await addProbeDays(trx, 3_000);
      await addAgents(trx, 20_000);
      const sellers = (await trx.raw("select id from agents order by name limit 20")).rows.map(
        (r: { id: string }) => r.id,
      );

      const ids = `'{${page.join(",")}}'::uuid[]`;
      const sellerIds = `'{${sellers.join(",")}}'::uuid[]`;
      expectIndexReads(await planNodes(trx, `execute days(${ids})`), "health_probe_days");
      expectIndexReads(await planNodes(trx, `execute latest(${ids})`), "health_probes");
      expectIndexReads(await planNodes(trx, `execute sellers(${sellerIds})`), "agents");

      // And the kept plans answer what the statements answer planned afresh.
      const days = await trx.raw(`execute days(${ids})`);
      expect(days.rows).toEqual((await trx.raw(HEALTH_DAYS_SQL, [page])).rows);
      expect(days.rows).toEqual([
        expect.objectContaining({ listing_id: hot, count_30d: "15", count_7d: "10" }),
      ]);
      const latest = await trx.raw(`execute latest(${ids})`);
      expect(latest.rows).toEqual((await trx.raw(LATEST_PROBES_SQL, [page])).rows);
      expect(latest.rows).toHaveLength(5);
      const found = await trx.raw(`execute sellers(${sellerIds})`);
      expect(found.rows).toEqual((await trx.raw(SELLERS_SQL, [sellers])).rows);
      expect(found.rows).toHaveLength(20);
      for (const name of ["days", "latest", "sellers"]) await trx.raw(`deallocate ${name}`);
    });
  });
});
