import { createRequire } from "node:module";
import knexFactory, { type Knex } from "knex";
import { dbStatementsPipelined } from "../observability/metrics.js";
import { lazyTransactor } from "./transactor.js";

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
// for them (writeEachTickOnce). A transaction whose last flight is known can send its COMMIT in it
// (commitWithThisFlight).

const require = createRequire(import.meta.url);

/** What pipeline.ts uses of knex's transaction internals (knex 3.3; they have no public types). */
interface KnexTransactionInternals {
  begin(connection: unknown): Promise<unknown>;
  commit(connection: unknown, value: unknown): Promise<unknown>;
  rollback(connection: unknown, error: unknown): Promise<unknown>;
  /** The transaction's own client: it sends every statement of the transaction, and refuses any once completed. */
  trxClient: { query(connection: unknown, sql: string): Promise<{ response?: { command?: string } }> };
  /** Settle what knex's `transaction()` answers. */
  _resolver(value: unknown): void;
  _rejecter(error: unknown): void;
  _completed: boolean;
  /** The knex client that began the transaction (the pool's), and the transaction it nests in, if any. */
  client: TransactionClient & { transacting?: boolean };
  outerTx: unknown;
  userParams?: Record<string, unknown>;
  transactor: unknown;
  isCompleted(): boolean;
  emit(event: string | symbol, ...args: unknown[]): boolean;
  _onAcquire(container: (transactor: unknown) => unknown, connection: unknown): Promise<unknown>;
}

/** knex's PostgreSQL transaction (knex 3.3, pinned in package-lock.json; the class has no public export). */
const PgTransaction = require("knex/lib/dialects/postgres/execution/pg-transaction.js") as new (
  ...args: unknown[]
) => KnexTransactionInternals;

/** Where a transaction's client keeps how to send its COMMIT with the flight being asked for. */
const COMMIT_WITH_FLIGHT = Symbol("commit with this tick's flight");

/**
 * Its handler failed after its COMMIT was sent, and PostgreSQL committed: what the handler wrote stands.
 * Only a programming error gets here (commitWithThisFlight: nothing may fail after the last flight).
 */
export class CommittedBeforeFailure extends Error {
  constructor(override readonly cause: unknown) {
    super(
      `the transaction committed before its handler failed: ${(cause as Error)?.message ?? String(cause)}`,
    );
    this.name = "CommittedBeforeFailure";
  }
}

/**
 * A knex transaction whose BEGIN does not wait for its answer: knex writes BEGIN to the connection
 * synchronously, so the handler's first statements go out right behind it in the same flight. knex still
 * watches BEGIN's answer and fails the transaction on an error (the statements behind it are then refused
 * as the transaction's: "Transaction query already complete"). BEGIN meets an error only when the
 * connection is gone, and then nothing behind it runs either; so a statement never runs outside the
 * transaction it was written for.
 *
 * Its COMMIT may also go out early, with the handler's last flight (commitWithThisFlight); the transaction
 * then ends as that COMMIT's answer says, whatever the handler does after.
 */
class PipelinedBegin extends PgTransaction {
  /** The COMMIT sent with the last flight, once asked for: its answer is the transaction's end. */
  private sentCommit: Promise<{ response?: { command?: string } }> | undefined;

  /**
   * knex's own start of a transaction once it holds a connection (knex 3.3's Transaction#_onAcquire), with
   * the transaction's client made here and its transactor a stand-in that builds knex's only when used
   * (transactor.ts). A savepoint's transaction is never one of these (only the pool's client makes them).
   */
  override _onAcquire(container: (transactor: unknown) => unknown, connection: unknown): Promise<unknown> {
    if (this.outerTx || this.client.transacting) return super._onAcquire(container, connection);
    const trxClient = transactionClient(this, this.client, connection);
    this.trxClient = trxClient as unknown as KnexTransactionInternals["trxClient"];
    const began = this.begin(connection);
    const execution = new Promise((resolve, reject) => {
      this._resolver = resolve;
      this._rejecter = reject;
    });
    began
      .then(() => {
        const transactor = lazyTransactor(this, connection, trxClient) as unknown as Record<string, unknown>;
        this.transactor = transactor;
        transactor.executionPromise = execution;
        // As knex: a handler that throws, or whose promise fails, rolls back; one that succeeds commits.
        let result: unknown;
        try {
          result = container(transactor);
        } catch (error) {
          result = Promise.reject(error);
        }
        if (typeof (result as PromiseLike<unknown> | null)?.then === "function")
          Promise.resolve(result)
            .then((value) => (transactor.commit as (v: unknown) => Promise<unknown>)(value))
            .catch((error) => (transactor.rollback as (e: unknown) => Promise<unknown>)(error));
        return null;
      })
      .catch((error) => this._rejecter(error));
    return execution;
  }

  override begin(connection: unknown): Promise<unknown> {
    (this.trxClient as unknown as Record<symbol, () => void>)[COMMIT_WITH_FLIGHT] = () =>
      this.commitAtTickEnd(connection);
    void super.begin(connection);
    dbStatementsPipelined.inc();
    return Promise.resolve();
  }

  /**
   * Sends COMMIT behind the statements asked for in this tick, in their write (lastInThisTicksWrite). From
   * then on the transaction is complete for knex: a statement asked for later is refused ("Transaction
   * query already complete"), never run outside the transaction.
   */
  private commitAtTickEnd(connection: unknown): void {
    if (this.sentCommit) return;
    this.sentCommit = new Promise((resolve, reject) => {
      lastInThisTicksWrite(connection as RawClient, () => {
        this.trxClient.query(connection, "COMMIT;").then(resolve, reject);
        this._completed = true;
      });
    });
    this.sentCommit.catch(() => undefined); // observed here; commit or rollback below answers it
    dbStatementsPipelined.inc();
  }

  // PostgreSQL answers COMMIT in a transaction that a failed statement aborted with ROLLBACK, not an
  // error: the command tag says which it was.
  override commit(connection: unknown, value: unknown): Promise<unknown> {
    if (!this.sentCommit) return super.commit(connection, value);
    return this.sentCommit.then(
      (answer) =>
        answer.response?.command === "COMMIT"
          ? this._resolver(value)
          : this._rejecter(
              new Error("the transaction rolled back at its COMMIT: a statement before it failed"),
            ),
      (error) => this._rejecter(error),
    );
  }

  override rollback(connection: unknown, error: unknown): Promise<unknown> {
    if (!this.sentCommit) return super.rollback(connection, error);
    return this.sentCommit.then(
      (answer) =>
        this._rejecter(answer.response?.command === "COMMIT" ? new CommittedBeforeFailure(error) : error),
      () => this._rejecter(error),
    );
  }
}

/** The parts of knex's client a transaction's own client copies (knex 3.3's makeTxClient). */
interface TransactionClient {
  constructor: { prototype: object };
  version?: unknown;
  config: unknown;
  driver: unknown;
  connectionSettings: unknown;
  valueForUndefined: unknown;
  logger: unknown;
  emit(event: string | symbol, ...args: unknown[]): boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  query(connection: unknown, statement: unknown): Promise<unknown>;
  stream(connection: unknown, statement: unknown, stream: unknown, options: unknown): Promise<unknown>;
}

/** The events a transaction's client passes on to its transaction and to the pool's client, as knex's. */
const FORWARDED_EVENTS = ["start", "query", "query-error", "query-response"] as const;

/**
 * A client that runs every statement on the transaction's connection and never releases it (what knex
 * 3.3's private makeTxClient makes, written here because knex does not export it): a statement for
 * another connection, or asked for once the transaction is complete, is refused as knex refuses it.
 */
function transactionClient(
  trx: KnexTransactionInternals,
  client: TransactionClient,
  connection: unknown,
): TransactionClient {
  const trxClient = Object.create(client.constructor.prototype) as TransactionClient &
    Record<string, unknown>;
  trxClient.version = client.version;
  trxClient.config = client.config;
  trxClient.driver = client.driver;
  trxClient.connectionSettings = client.connectionSettings;
  trxClient.transacting = true;
  trxClient.valueForUndefined = client.valueForUndefined;
  trxClient.logger = client.logger;
  for (const event of FORWARDED_EVENTS)
    trxClient.on(event, (...args: unknown[]) => {
      trx.emit(event, ...args);
      client.emit(event, ...args);
    });
  const guarded =
    <A extends unknown[]>(run: (conn: unknown, statement: unknown, ...rest: A) => Promise<unknown>) =>
    (conn: unknown, statement: unknown, ...rest: A): Promise<unknown> => {
      const completed = trx.isCompleted();
      return new Promise((resolve, reject) => {
        try {
          if (conn !== connection) throw new Error("Invalid connection for transaction query.");
          if (completed)
            throw new Error("Transaction query already complete, run with DEBUG=knex:tx for more info");
          resolve(run.call(trxClient, conn, statement, ...rest));
        } catch (error) {
          reject(error);
        }
      });
    };
  trxClient.query = guarded(trxClient.query);
  trxClient.stream = guarded(trxClient.stream);
  trxClient.acquireConnection = () => Promise.resolve(connection);
  trxClient.releaseConnection = () => Promise.resolve();
  return trxClient;
}

/**
 * Sends `trx`'s COMMIT with the flight being asked for in this tick, behind its statements: the caller
 * knows they are its transaction's last, and saves the round trip COMMIT would take after their answers
 * (and the locks it holds meanwhile). When one of them fails, PostgreSQL rolls the whole transaction back
 * at that COMMIT, and the handler gets the failure as usual. Nothing may be asked for afterwards (knex
 * refuses it), and nothing may fail after the flight: when the handler throws although the COMMIT
 * committed, the transaction answers CommittedBeforeFailure. False, and nothing sent, when `trx` is not a
 * top-level transaction of pipelinedKnex (a savepoint's, or another knex's): it then commits as usual.
 */
export function commitWithThisFlight(trx: Knex.Transaction): boolean {
  const send = (trx.client as unknown as Record<symbol, (() => void) | undefined>)[COMMIT_WITH_FLIGHT];
  if (!send) return false;
  send();
  return true;
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
 * throws, so that no statement is still running on the transaction once the caller rolls it back, and
 * none fails unobserved. It throws the first error in argument order that is not "transaction aborted"
 * (25P02): that one is only the consequence of another statement's failure, which the caller wants
 * (the statements go out in the order they were asked for, which a caller's argument order may not
 * follow). Only for statements whose order does not matter: each takes no lock another of them needs,
 * and none reads what another writes. Each promise is one statement
 * (agentmarket_db_statements_pipelined_total counts all but the first), or a step that starts with one.
 */
export async function inOneFlight<T extends readonly unknown[]>(
  ...statements: { [K in keyof T]: Promise<T[K]> }
): Promise<T> {
  dbStatementsPipelined.inc(statements.length - 1);
  const settled = await Promise.allSettled(statements);
  const errors = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as unknown] : []));
  if (errors.length > 0) throw errors.find((error) => !isTransactionAborted(error)) ?? errors[0];
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** 25P02: a statement refused because an earlier one aborted its transaction. */
function isTransactionAborted(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "25P02";
}

const CORKED = Symbol("corked until the tick's end");
const LAST_IN_WRITE = Symbol("sent last, just before the tick's write");

/** The parts of a pooled pg client that a flight's write touches. */
interface RawClient {
  query: (...args: unknown[]) => unknown;
  connection: {
    stream: { cork(): void; uncork(): void; [CORKED]?: boolean; [LAST_IN_WRITE]?: (() => void)[] };
  };
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
        // Still corked while they are sent: they join this write instead of corking a next one.
        const last = stream[LAST_IN_WRITE];
        stream[LAST_IN_WRITE] = undefined;
        for (const send of last ?? []) send();
        stream[CORKED] = false;
        stream.uncork();
      });
    }
    return query(...args);
  };
  done(null, conn);
}

/**
 * Runs `send` (which asks for a statement) once the statements asked for in this tick are with pg, so that
 * its statement goes out behind them, in their write. Every promise reaction of the tick runs before a
 * nextTick callback queued in one, and a statement reaches pg through promise reactions alone once its
 * connection is held (a transaction's is); so from a promise continuation, as every caller here is, the
 * tick's end is late enough. When this tick's write is already corked, `send` runs just before it goes.
 */
function lastInThisTicksWrite(conn: RawClient, send: () => void): void {
  const stream = conn.connection.stream;
  if (!stream[CORKED]) process.nextTick(send);
  else if (stream[LAST_IN_WRITE]) stream[LAST_IN_WRITE].push(send);
  else stream[LAST_IN_WRITE] = [send];
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
