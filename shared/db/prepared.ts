import { createHash } from "node:crypto";
import type { Knex } from "knex";
import { dbStatements } from "../observability/metrics.js";
import type { Db } from "./knex.js";
import { ShapedQuery } from "./row-shape.js";

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

/** Our `?` placeholders as PostgreSQL's `$n`, once per text (also what a test PREPAREs by hand). */
const numbered = new Map<string, { text: string; count: number }>();

export function numberedText(sql: string): { text: string; count: number } {
  let found = numbered.get(sql);
  if (!found) {
    let count = 0;
    // Single-quoted literals are kept whole; a `?` outside them is a placeholder.
    const text = sql.replace(/'(?:[^']|'')*'|\?\??/g, (token) => {
      if (token.startsWith("'")) return token;
      if (token === "??") throw new Error("preparedRaw: `??` (an identifier binding) is not supported");
      count += 1;
      return `$${count}`;
    });
    found = { text, count };
    numbered.set(sql, found);
  }
  return found;
}

interface PgConnection {
  // biome-ignore lint/suspicious/noExplicitAny: pg's result rows are untyped.
  query(query: ShapedQuery, callback: (error: Error | null, result: any) => void): void;
}

/**
 * Runs one statement on a connection of q: the pool's, or the transaction's own (a transaction's knex
 * client hands out its connection and releases nothing). Straight to the pg driver, not through knex's
 * query builder: on the execute path knex's own work per statement (placeholder parsing, query objects,
 * events) was a measurable share of the service's CPU (docs/benchmarks.md). Counted in
 * agentmarket_db_statements_total like every knex statement.
 */
// biome-ignore lint/suspicious/noExplicitAny: pg's result rows are untyped.
async function runNamed(q: Db, name: string, text: string, values: unknown[]): Promise<any> {
  // knex refuses a statement for a transaction that is complete; this path passes knex by, so it
  // refuses here, or the statement would run on a connection already back in the pool.
  if ((q as Knex.Transaction).isTransaction && (q as Knex.Transaction).isCompleted())
    throw new Error("Transaction query already complete, run with DEBUG=knex:tx for more info");
  const client = q.client as {
    acquireConnection(): Promise<PgConnection>;
    releaseConnection(connection: PgConnection): Promise<unknown>;
  };
  const connection = await client.acquireConnection();
  try {
    dbStatements.inc();
    // pg's callback form, as knex uses it. Its promise form made V8 promote ~a quarter of what a
    // statement allocated (its rows included) to the old generation under load, whose collections
    // then paused the service (docs/benchmarks.md, "Garbage"). Rows built per statement shape
    // (row-shape.ts).
    return await new Promise((resolve, reject) =>
      connection.query(new ShapedQuery({ name, text, values }), (error, result) =>
        error ? reject(error) : resolve(result),
      ),
    );
  } finally {
    await client.releaseConnection(connection);
  }
}

/**
 * q.raw(sql, bindings) as a named prepared statement (`?` placeholders, knex's convention). Outside a
 * transaction a statement that meets a changed row type runs once more under a fresh name; inside one
 * the error stands (the transaction is aborted) and the caller's retry, if any, meets the fresh name.
 */
// biome-ignore lint/suspicious/noExplicitAny: pg's raw results are untyped rows.
export async function preparedRaw(q: Db, sql: string, bindings: readonly Knex.RawBinding[]): Promise<any> {
  const { text, count } = numberedText(sql);
  if (bindings.length !== count || bindings.some((b) => b === undefined))
    throw new Error(
      `preparedRaw: ${count} placeholders, ${bindings.length} bindings (none may be undefined)`,
    );
  const values = bindings as unknown[];
  try {
    return await runNamed(q, statementName(sql), text, values);
  } catch (error) {
    if (!isStalePlan(error)) throw error;
    generation += 1;
    if ((q as Knex.Transaction).isTransaction) throw error;
    return runNamed(q, statementName(sql), text, values);
  }
}

/** A column value insertReturningAll writes as CURRENT_TIMESTAMP (knex's `q.fn.now()`), not as a binding. */
export const NOW = Symbol("CURRENT_TIMESTAMP");

/**
 * The database's UTC date of the transaction's start, as SQL: the day that per-day accounts (a key's
 * daily spend) are kept by, so that processes with skewed clocks agree on when a day ends. Within one
 * transaction every statement names the same day (`now()` is the transaction's start).
 */
export const UTC_TODAY_SQL = "(now() at time zone 'UTC')::date";

/** A column value insertReturningAll writes as UTC_TODAY_SQL, not as a binding. */
export const UTC_TODAY = Symbol("UTC_TODAY");

const insertTexts = new Map<string, string>();

/** A boolean SQL expression with its own `?` bindings: what a guarded insert must find true. */
export interface InsertGuard {
  sql: string;
  bindings: Knex.RawBinding[];
}

/**
 * What `q(table).insert(row).returning("*").toSQL()` gives, for a hot insert: the same text (so the same
 * prepared statement) and bindings, without building and compiling a knex query on every call (~4 % of
 * an execute's CPU). Columns in knex's order (sorted); an undefined value is DEFAULT, NOW is
 * CURRENT_TIMESTAMP, UTC_TODAY is UTC_TODAY_SQL. The text is kept per table and column set.
 *
 * With a guard (a boolean SQL expression, its own `?` bindings after the row's), the insert is
 * `INSERT … SELECT … WHERE guard`: nothing is written, and no row returned, unless the guard holds when
 * the statement runs. PostgreSQL types the selected parameters by their target columns, as in VALUES;
 * DEFAULT columns are left out of the list, which is the same.
 */
export function insertReturningAll(
  table: string,
  row: Record<string, unknown>,
  guard?: InsertGuard,
): { sql: string; bindings: Knex.RawBinding[] } {
  const columns = Object.keys(row).sort();
  const bindings: Knex.RawBinding[] = [];
  let shape = "";
  for (const column of columns) {
    const value = row[column];
    if (value === undefined) shape += "d";
    else if (value === NOW) shape += "n";
    else if (value === UTC_TODAY) shape += "u";
    else {
      shape += "v";
      bindings.push(value as Knex.RawBinding);
    }
  }
  const key = `${table}\u0000${columns.join("\u0000")}\u0000${shape}\u0000${guard?.sql ?? ""}`;
  let sql = insertTexts.get(key);
  if (!sql) {
    const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
    const value = (s: string) =>
      s === "d" ? "DEFAULT" : s === "n" ? "CURRENT_TIMESTAMP" : s === "u" ? UTC_TODAY_SQL : "?";
    if (guard) {
      const written = columns.filter((_, i) => shape[i] !== "d");
      const values = [...shape].filter((s) => s !== "d").map(value);
      sql = `insert into ${quote(table)} (${written.map(quote).join(", ")}) select ${values.join(", ")} where ${guard.sql} returning *`;
    } else {
      sql = `insert into ${quote(table)} (${columns.map(quote).join(", ")}) values (${[...shape].map(value).join(", ")}) returning *`;
    }
    insertTexts.set(key, sql);
  }
  return { sql, bindings: guard ? [...bindings, ...guard.bindings] : bindings };
}
