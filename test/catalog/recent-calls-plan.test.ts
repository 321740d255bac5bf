import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { RECENT_CALLS_SQL, recentCallsPlanSettings } from "../../shared/catalog/store/listing-stats.js";
import { inRolledBackTransaction, type PlanNode, planNodes } from "../helpers/plans.js";

// The ranking read of a listing's last calls must be an index walk that stops after the window, whatever
// the planner believes about the listing: here a busy listing that the statistics, taken before it grew,
// say has ten attempts. A temporary invocation_attempts (same columns and indexes, no foreign keys)
// shadows the real one for the transaction, so the history can be written freely.

function plan(trx: Knex.Transaction, listingId: string): Promise<PlanNode[]> {
  return planNodes(trx, RECENT_CALLS_SQL, [[listingId], 100]);
}

async function addAttempts(trx: Knex.Transaction, listingId: string, count: number, minutesAgo: number) {
  await trx.raw(
    `insert into invocation_attempts (id, invocation_id, attempt_no, listing_id, status, latency_ms, started_at)
     select gen_random_uuid(), gen_random_uuid(), 1, ?::uuid,
            case when n % 4 = 0 then 'failed' else 'succeeded' end, n % 500,
            now() - make_interval(mins => ?) + make_interval(secs => n / 100.0)
       from generate_series(1, ?) as n`,
    [listingId, minutesAgo, count],
  );
}

describe("the recent-calls read of ranking", () => {
  it("walks the index backwards for a busy listing the statistics call small, and reads its last calls", async () => {
    const hot = randomUUID();
    await inRolledBackTransaction(async (trx) => {
      await trx.raw(
        "create temporary table invocation_attempts (like public.invocation_attempts including all) on commit drop",
      );
      await addAttempts(trx, hot, 10, 600);
      for (let i = 0; i < 300; i++) await addAttempts(trx, randomUUID(), 10, 600);
      await trx.raw("analyze invocation_attempts");
      // It grows after its statistics were taken (no autovacuum here, or not yet).
      await addAttempts(trx, hot, 30_000, 300);

      // The condition is real: left to itself, the planner reads the whole history and sorts it.
      const free = await plan(trx, hot);
      expect(free.some((n) => n["Node Type"].startsWith("Bitmap") || n["Node Type"] === "Sort")).toBe(true);

      await recentCallsPlanSettings(trx);
      const walked = await plan(trx, hot);
      expect(walked.some((n) => n["Node Type"].startsWith("Bitmap") || n["Node Type"] === "Sort")).toBe(
        false,
      );
      expect(walked).toContainEqual(
        expect.objectContaining({ "Node Type": "Index Scan", "Scan Direction": "Backward" }),
      );

      // And it answers the last 100 completed calls: the newest rows are n = 29,901..30,000.
      const { rows } = await trx.raw(RECENT_CALLS_SQL, [[hot], 100]);
      const expected = await trx.raw(
        `select count(*) filter (where n % 4 <> 0) as succeeded from generate_series(29901, 30000) as n`,
      );
      expect(Number(rows[0].calls)).toBe(100);
      expect(Number(rows[0].succeeded)).toBe(Number(expected.rows[0].succeeded));
    });
  });
});
