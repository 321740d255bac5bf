import type { Knex } from "knex";
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
