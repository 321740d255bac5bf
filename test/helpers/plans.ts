import type { Knex } from "knex";
import { expect } from "vitest";
import { db } from "../../shared/db/knex.js";

// For tests that check how PostgreSQL plans a statement: the plan as a flat list of nodes, and a
// transaction that is always rolled back (the tables a plan test fills or shadows leave nothing behind).

export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Scan Direction"?: string;
  /** With `analyze`: the rows the node yielded (per loop). */
  "Actual Rows"?: number;
  Plans?: PlanNode[];
}

function flatten(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(flatten)];
}

/**
 * Every node of `explain (format json) <sql>`, the root first; `analyze` runs the statement too, for
 * the rows each node yielded (a read, or a write inside a transaction that is rolled back).
 */
export async function planNodes(
  q: Knex,
  sql: string,
  bindings: readonly Knex.RawBinding[] = [],
  options: { analyze?: boolean } = {},
): Promise<PlanNode[]> {
  const { rows } = await q.raw(`explain (${options.analyze ? "analyze, " : ""}format json) ${sql}`, bindings);
  return flatten(rows[0]["QUERY PLAN"][0].Plan);
}

/** Runs `work` in a transaction that is rolled back whatever it does; its own errors still fail the test. */
export async function inRolledBackTransaction(work: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
  const rollBack = new Error("roll back");
  await db()
    .transaction(async (trx) => {
      await work(trx);
      throw rollBack;
    })
    .catch((error: unknown) => {
      if (error !== rollBack) throw error;
    });
}

/** The reads of a table in a plan: there are some, and none is a sequential scan. */
export function expectIndexReads(plan: PlanNode[], table: string): void {
  const reads = plan.filter((n) => n["Relation Name"] === table).map((n) => n["Node Type"]);
  expect(reads.length, table).toBeGreaterThan(0);
  expect(reads, `${table}: ${JSON.stringify(reads)}`).not.toContain("Seq Scan");
}

/**
 * Temporary tables with the real ones' columns, rules and indexes (no foreign keys) that shadow them for
 * the transaction: a plan test fills and analyses them as it likes, and nothing is left behind.
 */
export async function shadowTables(trx: Knex.Transaction, tables: readonly string[]): Promise<void> {
  for (const table of tables)
    await trx.raw(`create temporary table ${table} (like public.${table} including all) on commit drop`);
}
