import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { numberedText } from "../../shared/db/prepared.js";
import { RESOLVE_RESERVATIONS_SQL } from "../../shared/identity/store/spend-days.js";
import { SUCCESSES_SQL } from "../../shared/routing/store/invocations.js";
import { inRolledBackTransaction, type PlanNode, planNodes } from "../helpers/plans.js";

// A pooled connection plans the grouped success (a named statement) once and keeps that plan until the
// tables are analysed again. A plan made while invocation_attempts and invocations were small (3,000
// rows, about what a fresh bench database holds after its warm-up) must still find a group's rows by
// their ids once the tables have grown: not read them whole for every group. Joined on the records'
// document alone, the statement was planned as a scan up to 20,000 rows and more; with the ids as
// arrays, below about 2,000 (where a scan is cheap, and autovacuum analyses again at each 10 % of growth).
// Temporary tables (same columns and indexes, no foreign keys) shadow the real ones for the transaction,
// and the statement is only explained, never run.

/** The plan PostgreSQL keeps for the prepared statement: the generic one, made at its first use. */
function keptPlan(trx: Knex.Transaction): Promise<PlanNode[]> {
  return planNodes(trx, "execute grouped_success('[]'::jsonb, '{}'::uuid[], '{}'::uuid[])");
}

async function addSucceeded(trx: Knex.Transaction, count: number): Promise<void> {
  await trx.raw(
    `with ids as (select gen_random_uuid() as id, gen_random_uuid() as listing_id from generate_series(1, ?))
     , inv as (
       insert into invocations (id, agent_id, api_key_id, listing_id, task, route, input, price_micros, status, output)
       select id, gen_random_uuid(), gen_random_uuid(), listing_id, 'echo', 'router', '{"text":"x"}', 0,
              'succeeded', '{"text":"x"}'
         from ids
     )
     insert into invocation_attempts (invocation_id, attempt_no, listing_id, status, latency_ms)
     select id, 1, listing_id, 'succeeded', 3 from ids`,
    [count],
  );
}

/** How each of the two tables is read: the scan nodes that name it. */
function readsOf(plan: PlanNode[], table: string): string[] {
  return plan.filter((n) => n["Relation Name"] === table).map((n) => n["Node Type"]);
}

/** Each plan reads each table, and none reads one whole. */
function expectLookups(plans: PlanNode[][], tables: string[]): void {
  for (const plan of plans)
    for (const table of tables) {
      const reads = readsOf(plan, table);
      expect(reads.length, `${table}: ${JSON.stringify(reads)}`).toBeGreaterThan(0);
      expect(reads, table).not.toContain("Seq Scan");
    }
}

describe("the grouped success's kept plan", () => {
  it("looks a group's rows up by id after the tables grew past the statistics it was planned on", async () => {
    await inRolledBackTransaction(async (trx) => {
      for (const table of ["invocation_attempts", "invocations"])
        await trx.raw(`create temporary table ${table} (like public.${table} including all) on commit drop`);
      await addSucceeded(trx, 3000);
      await trx.raw("analyze invocation_attempts");
      await trx.raw("analyze invocations");
      await trx.raw(`prepare grouped_success(jsonb, uuid[], uuid[]) as ${numberedText(SUCCESSES_SQL).text}`);
      await trx.raw("set local plan_cache_mode = force_generic_plan");
      const small = await keptPlan(trx);
      // They grow after their statistics were taken (no autovacuum here, or not yet): 100,000 rows.
      await addSucceeded(trx, 100_000);
      const grown = await keptPlan(trx);

      expectLookups([small, grown], ["invocation_attempts", "invocations"]);
      await trx.raw("deallocate grouped_success");
    });
  });

  it("settles a group's days of spend by looking its invocations and their days up, after the tables grew", async () => {
    await inRolledBackTransaction(async (trx) => {
      for (const table of ["invocation_attempts", "invocations", "api_key_spend_days"])
        await trx.raw(`create temporary table ${table} (like public.${table} including all) on commit drop`);
      const addDays = (count: number) =>
        trx.raw(
          `insert into api_key_spend_days (api_key_id, day, reserved_micros)
           select gen_random_uuid(), current_date - (n % 30), 1 from generate_series(1, ?) n`,
          [count],
        );
      await addSucceeded(trx, 3000);
      await addDays(3000);
      for (const table of ["invocations", "api_key_spend_days"]) await trx.raw(`analyze ${table}`);
      await trx.raw(
        `prepare grouped_settle(jsonb, uuid[]) as ${numberedText(RESOLVE_RESERVATIONS_SQL).text}`,
      );
      await trx.raw("set local plan_cache_mode = force_generic_plan");
      const plan = () => planNodes(trx, "execute grouped_settle('[]'::jsonb, '{}'::uuid[])");
      const small = await plan();
      await addSucceeded(trx, 100_000);
      await addDays(100_000);
      const grown = await plan();

      expectLookups([small, grown], ["invocations", "api_key_spend_days"]);
      await trx.raw("deallocate grouped_settle");
    });
  });
});
