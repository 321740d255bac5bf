import { createRequire } from "node:module";
import knexFactory, { type Knex } from "knex";
import { dbStatementsPipelined } from "../observability/metrics.js";

// Statements sent without waiting for the answer of the one before (docs/benchmarks.md "The twentieth
// round"). Every pooled connection runs in pg's pipeline mode: a statement is written to the socket as
// soon as it is asked for, each with its own Sync, and the answers come back in the order the statements
// went out. Nothing changes for code that awaits each statement before the next; what changes is that
// statements asked for together, on one connection, cost one round trip instead of one each.
//
// PostgreSQL runs them in the order they arrive, one at a time, exactly as if each had waited: a statement
// that fails aborts an open transaction, and the ones behind it then fail too (SQLSTATE 25P02) until the
// transaction is rolled back, as they would have one by one. Two things only are sent together here:
//
// - a transaction's BEGIN and its first statements (PipelinedBegin below);
// - statements the caller knows to be independent, through inOneFlight.
//
// A flight goes to the socket in one write: a connection's writes wait for the end of the tick that asked
// for them (writeEachTickOnce).

const require = createRequire(import.meta.url);

/** knex's PostgreSQL transaction (knex 3.3, pinned in package-lock.json; the class has no public export). */
const PgTransaction = require("knex/lib/dialects/postgres/execution/pg-transaction.js") as new (
  ...args: unknown[]
) => { begin(connection: unknown): Promise<unknown> };

/**
 * A knex transaction whose BEGIN does not wait for its answer: knex writes BEGIN to the connection
 * synchronously, so the handler's first statements go out right behind it in the same flight. knex still
 * watches BEGIN's answer and fails the transaction on an error (the statements behind it are then refused
 * as the transaction's: "Transaction query already complete"). BEGIN meets an error only when the
 * connection is gone, and then nothing behind it runs either; so a statement never runs outside the
 * transaction it was written for.
 */
class PipelinedBegin extends PgTransaction {
  override begin(connection: unknown): Promise<unknown> {
    void super.begin(connection);
    dbStatementsPipelined.inc();
    return Promise.resolve();
  }
}

/**
 * A knex instance for PostgreSQL at `connectionString` whose connections run in pipeline mode, write each
 * tick's statements at once (writeEachTickOnce), and whose top-level transactions are PipelinedBegin. The
 * first two go together: without pipeline mode, the statements behind an unanswered BEGIN would only queue
 * in the driver.
 */
export function pipelinedKnex(
  connectionString: string,
  config: Omit<Knex.Config, "client" | "connection">,
): Knex {
  // `pipeline` is pg's client option, passed through by knex; knex's connection types do not list it.
  const connection = { connectionString, pipeline: true };
  const instance = knexFactory({
    ...config,
    client: "pg",
    connection,
    pool: { ...config.pool, afterCreate: writeEachTickOnce },
  });
  const client = instance.client as { transaction: (...args: unknown[]) => unknown };
  client.transaction = function (this: unknown, ...args: unknown[]) {
    return new PipelinedBegin(this, ...args);
  };
  return instance;
}

/**
 * Awaits statements the caller started together (on one transaction they went out in one flight), and
 * answers their results in order. Unlike Promise.all it waits for every one of them to settle before it
 * throws the first error, so that no statement is still running on the transaction once the caller
 * rolls it back, and none fails unobserved. Only for statements whose order does not matter: each takes
 * no lock another of them needs, and none reads what another writes. Each promise is one statement
 * (agentmarket_db_statements_pipelined_total counts all but the first), or a step that starts with one.
 */
export async function inOneFlight<T extends readonly unknown[]>(
  ...statements: { [K in keyof T]: Promise<T[K]> }
): Promise<T> {
  dbStatementsPipelined.inc(statements.length - 1);
  const settled = await Promise.allSettled(statements);
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

const CORKED = Symbol("corked until the tick's end");

/** The parts of a pooled pg client that a flight's write touches. */
interface RawClient {
  query: (...args: unknown[]) => unknown;
  connection: { stream: { cork(): void; uncork(): void; [CORKED]?: boolean } };
}

/**
 * Holds a new connection's writes until the end of the tick that asked for them, so that a flight goes
 * to the socket in one write instead of one per statement (pg corks each statement's own messages, not
 * several statements). A socket write that wakes PostgreSQL is among the dearest calls of a paid execute
 * (`writev` leads its profiles), and a flight of four paid for four (docs/benchmarks.md "The twenty-first
 * round"). A statement asked for alone waits only for the tick's other callbacks, never for a timer: the
 * uncork is a nextTick, which runs once the current callbacks and promise reactions are done.
 */
function writeEachTickOnce(conn: RawClient, done: (error: Error | null, conn: RawClient) => void): void {
  const query = conn.query.bind(conn);
  conn.query = (...args: unknown[]) => {
    // Read here, not once: pg swaps in a TLS socket after the handshake when the connection asks for one.
    const stream = conn.connection.stream;
    if (!stream[CORKED]) {
      stream[CORKED] = true;
      stream.cork();
      process.nextTick(() => {
        stream[CORKED] = false;
        stream.uncork();
      });
    }
    return query(...args);
  };
  done(null, conn);
}

/**
 * A flight sent ahead of a step that awaits it later (a ledger post's `before`), marked observed now: if
 * that step throws before it awaits the flight, a failure of the flight is not an unhandled rejection.
 * Whoever awaits it still gets the error.
 */
export function sentAhead<T>(flight: Promise<T>): Promise<T> {
  flight.catch(() => undefined);
  return flight;
}
