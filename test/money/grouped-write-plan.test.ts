import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { numberedText } from "../../shared/db/prepared.js";
import { MANY_POSTS_SQL } from "../../shared/money/ledger/store.js";
import { inRolledBackTransaction, type PlanNode, planNodes } from "../helpers/plans.js";

// A paid group's ledger write (writeTransactionsInFlight) has one text for every group, so a connection
// keeps one plan for it, and PostgreSQL guesses each of its JSON arrays at 100 rows. With that guess, on
// tables whose statistics were missing (a database never analysed), the plan hashed 100 guessed posts
// against the whole transactions table to find the holds they resolve, read the accounts before the
// hold's entries, and took 10 ms for eight captures on a test database. The holds are now looked up post
// by post, and their held entries by their transaction. Temporary tables (same columns and indexes, no
// foreign keys) shadow the real ones for the transaction, and the statement is only explained.

const TABLES = ["ledger_accounts", "ledger_transactions", "ledger_entries"];

function keptPlan(trx: Knex.Transaction): Promise<PlanNode[]> {
  return planNodes(trx, "execute grouped_write('[]'::jsonb, '[]'::jsonb, '[]'::jsonb)");
}

/** `buyers` buyers' two accounts each, and `holds` holds spread over them (two entries each). */
async function addHolds(trx: Knex.Transaction, buyers: number, holds: number): Promise<void> {
  await trx.raw(
    `with b as (select n, gen_random_uuid() as owner, gen_random_uuid() as available, gen_random_uuid() as held
                  from generate_series(0, ? - 1) n),
     accounts as (
       insert into ledger_accounts (id, owner_agent_id, kind, currency, balance_micros, allow_negative)
       select available, owner, 'agent_available', 'USDC', 0, false from b
       union all select held, owner, 'agent_held', 'USDC', 1, false from b
     ),
     h as (select gen_random_uuid() as tx, b.available, b.held
             from generate_series(1, ?) i join b on b.n = i % ?),
     txs as (
       insert into ledger_transactions (id, kind, idempotency_key)
       select tx, 'hold', 'hold:' || tx from h
     )
     insert into ledger_entries (transaction_id, account_id, amount_micros, balance_before_micros, balance_after_micros)
     select tx, available, -1, 1, 0 from h union all select tx, held, 1, 0, 1 from h`,
    [buyers, holds, buyers],
  );
}

/** How a table is read: the scan nodes that name it. */
function readsOf(plan: PlanNode[], table: string): string[] {
  return plan.filter((n) => n["Relation Name"] === table).map((n) => n["Node Type"]);
}

describe("a paid group's ledger write, as kept", () => {
  it("looks each hold and its held entry up, never scanning the transactions or entries, with or without statistics", async () => {
    await inRolledBackTransaction(async (trx) => {
      for (const table of TABLES)
        await trx.raw(`create temporary table ${table} (like public.${table} including all) on commit drop`);
      await trx.raw(`prepare grouped_write(jsonb, jsonb, jsonb) as ${numberedText(MANY_POSTS_SQL).text}`);
      await trx.raw("set local plan_cache_mode = force_generic_plan");
      // Never analysed (a fresh database, no autovacuum yet), shaped as the test database was: 400 buyers'
      // accounts, 30,000 holds.
      await addHolds(trx, 400, 30_000);
      const unanalysed = await keptPlan(trx);
      // Analysed, then grown past those statistics: 50,000 more buyers, 100,000 more holds.
      for (const table of TABLES) await trx.raw(`analyze ${table}`);
      await addHolds(trx, 50_000, 100_000);
      const grown = await keptPlan(trx);

      for (const plan of [unanalysed, grown]) {
        for (const table of ["ledger_transactions", "ledger_entries"]) {
          const reads = readsOf(plan, table);
          expect(reads.length, `${table}: ${JSON.stringify(reads)}`).toBeGreaterThan(0);
          expect(reads, table).not.toContain("Seq Scan");
        }
        // The held entries by their transaction, not by the accounts: the index of each read of them.
        const entryIndexes = plan.flatMap((n) =>
          n["Index Name"]?.startsWith("ledger_entries_") ? [n["Index Name"]] : [],
        );
        expect(entryIndexes.length).toBeGreaterThan(0);
        expect(entryIndexes.filter((name) => !name.includes("transaction"))).toEqual([]);
      }
      await trx.raw("deallocate grouped_write");
    });
  });
});
