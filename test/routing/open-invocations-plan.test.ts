import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { newTimeOrderedId, timeOrderedIdFloor } from "../../shared/kernel/ids.js";
import { listSentOpenInvocations } from "../../shared/routing/store/invocations.js";
import { inRolledBackTransaction, type PlanNode, planNodes } from "../helpers/plans.js";

// The executions recovery sweep reads the open invocations (shared/routing/recovery.ts). Its full pass
// was a sequential scan of the whole history (170–220 ms at 102,000 invocations, every 10 minutes in
// every executions process); through the partial index of open invocations (migrations/20261201000100)
// it reads only those. Temporary tables (same columns and indexes, no foreign keys) shadow the real ones
// for the transaction: 100,000 ended invocations and a few open ones, analysed; the statement is only
// explained, never run.

async function addInvocations(trx: Knex.Transaction, count: number, status: string): Promise<void> {
  await trx.raw(
    `insert into invocations (agent_id, api_key_id, listing_id, task, route, input, price_micros, status, created_at)
     select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'echo', 'router', '{"text":"x"}', 0, ?,
            now() - interval '1 hour'
       from generate_series(1, ?)`,
    [status, count],
  );
}

/** The index on the shadowing table whose definition has a predicate: the open invocations'. */
async function openIndexName(trx: Knex.Transaction): Promise<string> {
  const { rows } = await trx.raw(
    "select indexrelid::regclass::text as name from pg_index where indrelid = 'invocations'::regclass and indpred is not null",
  );
  expect(rows, "a partial index on invocations").toHaveLength(1);
  return rows[0].name;
}

/** How the plan reads invocations: its scan nodes' types, and the indexes of invocations it uses. */
function readsOfInvocations(plan: PlanNode[]): { scans: string[]; indexes: string[] } {
  return {
    scans: plan.filter((n) => n["Relation Name"] === "invocations").map((n) => n["Node Type"]),
    indexes: plan.map((n) => n["Index Name"] ?? "").filter((name) => name.startsWith("invocations")),
  };
}

describe("the recovery sweep's read of open invocations", () => {
  it("goes through the partial index of open invocations, not the history", async () => {
    await inRolledBackTransaction(async (trx) => {
      for (const table of ["invocations", "job_outbox"])
        await trx.raw(`create temporary table ${table} (like public.${table} including all) on commit drop`);
      await addInvocations(trx, 100_000, "succeeded");
      await addInvocations(trx, 20, "running");
      await trx.raw("analyze invocations");
      await trx.raw("analyze job_outbox");
      const index = await openIndexName(trx);

      const passes = {
        full: listSentOpenInvocations(trx, 10, 100),
        "full, after a batch": listSentOpenInvocations(trx, 10, 100, undefined, newTimeOrderedId()),
        window: listSentOpenInvocations(trx, 10, 100, timeOrderedIdFloor(new Date(Date.now() - 900_000))),
      };
      for (const [pass, query] of Object.entries(passes)) {
        const { sql, bindings } = query.toSQL();
        const reads = readsOfInvocations(await planNodes(trx, sql, bindings));
        expect(reads.scans, pass).not.toContain("Seq Scan");
        expect(reads.indexes, pass).toEqual([index]);
      }
    });
  });
});
