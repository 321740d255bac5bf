import type { Knex } from "knex";
import { db } from "../../shared/db/knex.js";

// For tests that check how PostgreSQL plans a statement: the plan as a flat list of nodes, and a
// transaction that is always rolled back (the tables a plan test fills or shadows leave nothing behind).

export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Scan Direction"?: string;
  Plans?: PlanNode[];
}

function flatten(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(flatten)];
}

/** Every node of `explain (format json) <sql>` in the transaction, the root first. */
export async function planNodes(
  trx: Knex.Transaction,
  sql: string,
  bindings: readonly Knex.RawBinding[] = [],
): Promise<PlanNode[]> {
  const { rows } = await trx.raw(`explain (format json) ${sql}`, bindings);
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
