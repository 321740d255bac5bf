import { createHash } from "node:crypto";
import type { Knex } from "knex";
import type { Db } from "./knex.js";

// Named prepared statements for the execute path's hot statements (docs/benchmarks.md "Levers").
//
// knex sends every statement unnamed, so PostgreSQL parses and plans it on each call: for the large
// CTEs of the execute path that was most of their server time. A named statement is parsed once per
// connection and, after five executions, usually runs on a cached generic plan. The name is derived from
// the SQL text, so two texts can never share a name (the driver refuses that) and a statement whose text
// varies (an insert's column list) simply gets one name per variant. Only hot statements with a bounded
// set of texts go through here: each name costs a little memory on every pooled connection.

const names = new Map<string, string>();

/**
 * Bumped when PostgreSQL refuses a cached plan because a migration changed a table's row type under a
 * running process ("cached plan must not change result type"): later statements take fresh names, so
 * only the statement that met the change fails, never the connection for good.
 */
let generation = 0;

function statementName(sql: string): string {
  let base = names.get(sql);
  if (!base) {
    base = `am_${createHash("sha1").update(sql).digest("hex").slice(0, 24)}`;
    names.set(sql, base);
  }
  return generation === 0 ? base : `${base}_${generation}`;
}

function isStalePlan(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  return e.code === "0A000" && /cached plan must not change result type/.test(e.message ?? "");
}

/**
 * q.raw(sql, bindings) as a named prepared statement. Outside a transaction a statement that meets a
 * changed row type runs once more under a fresh name; inside one the error stands (the transaction is
 * aborted) and the caller's retry, if any, meets the fresh name.
 */
// biome-ignore lint/suspicious/noExplicitAny: knex's raw results are untyped rows.
export async function preparedRaw(q: Db, sql: string, bindings: readonly Knex.RawBinding[]): Promise<any> {
  const run = () => q.raw(sql, bindings as Knex.RawBinding[]).options({ name: statementName(sql) });
  try {
    return await run();
  } catch (error) {
    if (!isStalePlan(error)) throw error;
    generation += 1;
    if ((q as Knex.Transaction).isTransaction) throw error;
    return run();
  }
}
