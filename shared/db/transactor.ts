import { createRequire } from "node:module";
import type { Knex } from "knex";

// A top-level transaction's knex object, built only when something needs it (docs/benchmarks.md "The
// twenty-fourth round").
//
// knex gives every transaction a knex instance of its own (its "transactor"): a function with about a
// hundred query methods added one by one as own properties, property getters, an event emitter and four
// listeners. That was ~55 KB of a paid execute's ~380 KB of allocations and its largest single function
// in CPU profiles (knex's redefineProperties), for two transactions whose statements never use any of it:
// the execute path's statements are named prepared statements (prepared.ts), which need only the
// transaction's client to reach its connection. So the transactor handed to a transaction's handler is a
// stand-in that answers what those statements and knex's own commit and rollback read (client,
// isTransaction, userParams, commit, rollback, isCompleted) and builds knex's full transactor, exactly
// as knex builds it, the first time anything else is asked of it (a query builder, raw, a savepoint...).
// From then on every read and write goes to the full one, which starts with whatever was set on the
// stand-in. Either way the handler sees the same behaviour.

const require = createRequire(import.meta.url);

/** knex's own builder of a knex instance on a client (knex 3.3, pinned in package-lock.json). */
const makeKnex = require("knex/lib/knex-builder/make-knex.js") as (client: unknown) => FullTransactor;

type FullTransactor = Knex.Transaction & Record<PropertyKey, unknown> & { context: Record<string, unknown> };

/** What the stand-in uses of knex's Transaction (its internals have no public types). */
export interface TransactionOfTransactor {
  userParams?: Record<string, unknown>;
  commit(connection: unknown, value: unknown): Promise<unknown>;
  rollback(connection: unknown, error: unknown): Promise<unknown>;
  isCompleted(): boolean;
}

/** Stand-ins that built knex's transactor: a test reads it to show the execute path builds none. */
const builtStandIns = new WeakSet<object>();

/** Whether this transaction's stand-in has built knex's full transactor (false for any other object). */
export const builtFullTransactor = (trx: object): boolean => builtStandIns.has(trx);

/**
 * knex's makeTransactor for a top-level transaction (knex 3.3, lib/execution/transaction.js), but for
 * its commit, rollback and the rest the stand-in already holds (copied onto it by lazyTransactor).
 */
function fullTransactor(trx: TransactionOfTransactor, trxClient: unknown): FullTransactor {
  const transactor = makeKnex(trxClient);
  transactor.context.withUserParams = () => {
    throw new Error(
      "Cannot set user params on a transaction - it can only inherit params from main knex instance",
    );
  };
  transactor.context.transaction = function (
    this: { _transaction(container: unknown, options: unknown, outer: unknown): unknown },
    container: unknown,
    options?: { doNotRejectOnRollback?: boolean },
  ) {
    const config = { ...options };
    if (config.doNotRejectOnRollback === undefined) config.doNotRejectOnRollback = true;
    return this._transaction(container, config, trx);
  };
  (transactor as Record<string, unknown>).savepoint = (container: unknown, options: unknown) =>
    (transactor.transaction as (c: unknown, o: unknown) => unknown)(container, options);
  return transactor;
}

/**
 * The transactor of a top-level transaction `trx` on `connection`, whose client is `trxClient`: a
 * stand-in until something beyond what prepared statements and knex's commit read is asked of it.
 */
export function lazyTransactor(
  trx: TransactionOfTransactor,
  connection: unknown,
  trxClient: unknown,
): Knex.Transaction {
  const own: Record<PropertyKey, unknown> = {
    client: trxClient,
    isTransaction: true,
    userParams: trx.userParams ?? {},
    commit: (value?: unknown) => trx.commit(connection, value),
    rollback: (error?: unknown) => trx.rollback(connection, error),
    isCompleted: () => trx.isCompleted(),
  };
  let full: FullTransactor | undefined;
  const theFull = (): FullTransactor => {
    if (!full) {
      full = Object.assign(fullTransactor(trx, trxClient), own);
      builtStandIns.add(standIn);
    }
    return full;
  };
  // The target is only a function, so that the stand-in can be called as knex's transactor is; an arrow
  // function, so that it has no non-configurable own property (`prototype`) the full one's keys and
  // descriptors must agree with. Anything beyond reading, setting and calling builds the full one.
  const standIn = new Proxy(() => undefined, {
    apply: (_target, _this, args: unknown[]) =>
      (theFull() as unknown as (...a: unknown[]) => unknown)(...args),
    // `then` is read when the stand-in is a promise's value: knex's transactor has none either.
    get: (_target, name) =>
      name === "then"
        ? undefined
        : full || !Object.hasOwn(own, name)
          ? Reflect.get(theFull(), name)
          : own[name],
    set: (_target, name, value) => {
      if (full) return Reflect.set(full, name, value);
      own[name] = value;
      return true;
    },
    has: (_target, name) => (!full && Object.hasOwn(own, name)) || name in theFull(),
    // Enumerated (lodash's isEmpty, in knex's `transacting`), described, defined or deleted: as the full
    // one, each descriptor reported configurable, which a proxy must say of what its target lacks.
    ownKeys: () => Reflect.ownKeys(theFull()),
    getOwnPropertyDescriptor: (_target, name) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(theFull(), name);
      return descriptor && { ...descriptor, configurable: true };
    },
    defineProperty: (_target, name, descriptor) => Reflect.defineProperty(theFull(), name, descriptor),
    deleteProperty: (_target, name) => Reflect.deleteProperty(theFull(), name),
  });
  return standIn as unknown as Knex.Transaction;
}
