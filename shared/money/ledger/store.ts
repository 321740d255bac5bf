import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import {
  evidenceDocument,
  insertWithPostsFromJson,
  insertWithTransaction,
  insertWithTransactionValues,
  type PostEvidence,
} from "../evidence/store.js";

export const ACCOUNT_KINDS = [
  "agent_available",
  "agent_held",
  "seller_payable",
  "platform_revenue",
  "chain_clearing",
  "bonds",
  "sandbox_faucet",
] as const;
export type AccountKind = (typeof ACCOUNT_KINDS)[number];
export type AgentAccountKind = Exclude<AccountKind, PlatformAccountKind>;
/** sandbox_faucet is the source of the sandbox's simulated tUSDC and exists in tUSDC only. */
export type PlatformAccountKind = "platform_revenue" | "chain_clearing" | "sandbox_faucet";

/**
 * Accounts that mirror units outside the ledger and so may go negative: chain clearing (money on chain)
 * and the sandbox faucet (simulated units created from nothing). A check constraint backs the rule.
 */
const NEGATIVE_ALLOWED: readonly AccountKind[] = ["chain_clearing", "sandbox_faucet"];

/** USDC is real money; tUSDC is the sandbox's simulated unit. They never meet in one transaction. */
export const CURRENCIES = ["USDC", "tUSDC"] as const;
export type Currency = (typeof CURRENCIES)[number];

export const TRANSACTION_KINDS = [
  "hold",
  "capture",
  "release",
  "deposit",
  "bond_post",
  "bond_release",
  "payout",
  "transfer",
  "faucet",
] as const;
export type TransactionKind = (typeof TRANSACTION_KINDS)[number];

export interface LedgerAccountRow {
  id: string;
  owner_agent_id: string | null;
  kind: AccountKind;
  currency: Currency;
  balance_micros: bigint;
  allow_negative: boolean;
  created_at: Date;
}

export interface LedgerTransactionRow {
  id: string;
  kind: TransactionKind;
  idempotency_key: string;
  reference_type: string | null;
  reference_id: string | null;
  resolves_transaction_id: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

export interface LedgerEntryRow {
  id: string;
  transaction_id: string;
  account_id: string;
  amount_micros: bigint;
  balance_before_micros: bigint;
  balance_after_micros: bigint;
  created_at: Date;
}

/** An entry with its account's kind, owner and currency, as a transaction's entries are read back. */
export interface LedgerEntryView extends LedgerEntryRow {
  kind: AccountKind;
  owner_agent_id: string | null;
  currency: Currency;
}

type Raw<T, K extends keyof T> = Omit<T, K> & { [P in K]: string };

function toAccount(row: Raw<LedgerAccountRow, "balance_micros">): LedgerAccountRow {
  return { ...row, balance_micros: BigInt(row.balance_micros) };
}

function toEntry<T extends LedgerEntryRow>(
  row: Raw<T, "amount_micros" | "balance_before_micros" | "balance_after_micros">,
): T {
  return {
    ...row,
    amount_micros: BigInt(row.amount_micros),
    balance_before_micros: BigInt(row.balance_before_micros),
    balance_after_micros: BigInt(row.balance_after_micros),
  } as T;
}

/**
 * The account of (owner, kind, currency), created on first use. Race-safe: concurrent creators insert
 * with ON CONFLICT DO NOTHING (either partial unique index) and then all read the one row. Under READ
 * COMMITTED the second read sees the winner's row once the insert has waited for it to commit.
 */
export async function getOrCreateAccount(
  q: Db,
  ownerAgentId: string | null,
  kind: AccountKind,
  currency: Currency,
): Promise<LedgerAccountRow> {
  const find = () =>
    q("ledger_accounts")
      .where({ kind, currency })
      .modify((query) => {
        if (ownerAgentId === null) query.whereNull("owner_agent_id");
        else query.where({ owner_agent_id: ownerAgentId });
      })
      .first();
  const found = await find();
  if (found) return toAccount(found);
  await createAccounts(q, [{ owner: ownerAgentId, kind, currency }]);
  const created = await find();
  if (!created) throw new Error(`ledger account ${kind}/${currency} was created but is not visible`);
  return toAccount(created);
}

/** Locks the accounts with SELECT … FOR UPDATE in id order (the one lock order: no deadlocks). */
export async function lockAccounts(q: Db, ids: string[]): Promise<LedgerAccountRow[]> {
  return lockAccountRefs(
    q,
    ids.map((id) => ({ id })),
  );
}

/**
 * An account named by what it is (owner, kind, currency) rather than by id. A post resolves such names
 * in the statement that locks its accounts, so the money paths spend no round trip looking accounts up
 * (docs/benchmarks.md "The fourth round").
 */
export interface AccountKey {
  owner: string | null;
  kind: AccountKind;
  currency: Currency;
}

/** How a ledger leg names its account: by id (a row read earlier) or by key. */
export type AccountRef = Pick<LedgerAccountRow, "id"> | AccountKey;

/**
 * The held entry of a hold transaction `t` (its amount, and its account's owner and currency), as `h`.
 * The transaction's entries are read first, by their transaction (`offset 0` keeps the planner from
 * starting at the accounts instead): where a table's statistics are missing or stale, a plan kept for
 * many holds walked every held account of every buyer, and each one's entries, for each hold.
 */
const HELD_ENTRY = `left join lateral (
         select e.amount_micros, a.owner_agent_id, a.currency
           from (select e.id, e.amount_micros, e.account_id from ledger_entries e
                  where e.transaction_id = t.id offset 0) e
           join ledger_accounts a on a.id = e.account_id
          where a.kind = 'agent_held'
          order by e.id limit 1
       ) h on true`;
const HELD_COLUMNS =
  "h.amount_micros::text as held_micros, h.owner_agent_id as held_owner, h.currency as held_currency";

/**
 * The statement that locks the accounts named by id or by key, FOR UPDATE in id order (the one lock
 * order), with its bindings. Its text depends only on how many ids and which key shapes it names, so
 * it runs as a named prepared statement (preparedRaw): a hold and a capture each lock their accounts
 * once per paid call, and planning the statement afresh each time was most of its server time
 * (docs/benchmarks.md "The nineteenth round"). `lookups` adds, in the same statement, the post's key
 * and the hold it resolves (lockForPost); a hold named by key is read whole there, so that a capture
 * needs no read of its own before its lock (docs/benchmarks.md "The twenty-first round").
 */
function lockStatement(
  refs: AccountRef[],
  options: { noWait: boolean; lookups?: { idempotencyKey: string; holdKey: string | null } },
): { sql: string; bindings: Knex.RawBinding[] } {
  const ids = refs.flatMap((r) => ("id" in r ? [r.id] : []));
  const keys = refs.filter((r): r is AccountKey => !("id" in r));
  const bindings: Knex.RawBinding[] = [];
  let columns = "ledger_accounts.*";
  let hold = "";
  if (options.lookups) {
    columns += ", (select id from ledger_transactions where idempotency_key = ?) as key_taken_by";
    bindings.push(options.lookups.idempotencyKey);
    const holdKey = options.lookups.holdKey;
    // A post that resolves no hold (a hold itself) looks for none. Sent as `resolves_transaction_id =
    // null`, the lookup made PostgreSQL's cached generic plan look dearer than a custom plan that folds it
    // away, so it planned the hold's lock afresh on every call.
    if (holdKey === null) columns += ", null::uuid as hold_resolved_by";
    else {
      // The hold by its key, with its held entry and whatever resolved it: one row, or none (then every
      // hold_ column is null). Joined outside the lock: FOR UPDATE OF locks the accounts only.
      columns +=
        ", hold.hold_id, hold.hold_reference_type, hold.hold_reference_id, hold.held_micros, hold.held_owner," +
        " hold.held_currency, hold.hold_resolved_by";
      hold = ` left join (
         select t.id as hold_id, t.reference_type as hold_reference_type, t.reference_id as hold_reference_id,
                ${HELD_COLUMNS},
                (select r.id from ledger_transactions r where r.resolves_transaction_id = t.id) as hold_resolved_by
           from ledger_transactions t ${HELD_ENTRY}
          where t.idempotency_key = ? and t.kind = 'hold'
       ) hold on true`;
      bindings.push(holdKey);
    }
  }
  const named: string[] = [];
  if (ids.length > 0) {
    named.push(`ledger_accounts.id in (${ids.map(() => "?").join(", ")})`);
    bindings.push(...ids);
  }
  for (const k of keys) {
    const owner = k.owner === null ? "owner_agent_id is null" : "owner_agent_id = ?";
    named.push(`(kind = ? and currency = ? and ${owner})`);
    bindings.push(k.kind, k.currency, ...(k.owner === null ? [] : [k.owner]));
  }
  if (named.length === 0) throw new Error("a ledger lock needs at least one account");
  const sql = `select ${columns} from ledger_accounts${hold} where ${named.join(" or ")} order by ledger_accounts.id for update of ledger_accounts${
    options.noWait ? " nowait" : ""
  }`;
  return { sql, bindings };
}

/**
 * Locks the accounts named by id or by key, in id order, in one statement. Accounts named by a key that
 * does not exist yet are missing from the answer: createAccounts makes them.
 */
export async function lockAccountRefs(
  q: Db,
  refs: AccountRef[],
  options: { noWait?: boolean } = {},
): Promise<LedgerAccountRow[]> {
  const { sql, bindings } = lockStatement(refs, { noWait: options.noWait === true });
  const result = await preparedRaw(q, sql, bindings);
  return (result.rows as Raw<LedgerAccountRow, "balance_micros">[]).map(toAccount);
}

/** A hold as the lock's statement read it by key: its transaction, its held entry, what resolved it. */
export interface ResolvedHold {
  transactionId: string;
  referenceType: string | null;
  referenceId: string | null;
  /** The held entry: whose funds, in which currency, how much (null when the hold has none: a bug). */
  heldMicros: bigint | null;
  heldOwner: string | null;
  heldCurrency: Currency | null;
}

/** What a post reads with its locks: the accounts, and what its snapshot saw of the key and the hold. */
export interface LockedForPost {
  accounts: LedgerAccountRow[];
  /** A transaction already recorded under the post's key (then the post is a replay). */
  keyTakenBy: string | null;
  /** A transaction that already resolved the hold the post resolves. */
  holdResolvedBy: string | null;
  /**
   * The hold, when the post named it by key: null when there is no hold under that key; undefined when
   * none of the accounts existed yet, so the statement answered no row to carry it (then read it apart).
   */
  hold?: ResolvedHold | null;
}

interface LockForPostRow extends Raw<LedgerAccountRow, "balance_micros"> {
  key_taken_by: string | null;
  hold_resolved_by: string | null;
  hold_id?: string | null;
  hold_reference_type?: string | null;
  hold_reference_id?: string | null;
  held_micros?: string | null;
  held_owner?: string | null;
  held_currency?: Currency | null;
}

/**
 * Locks the accounts (as lockAccountRefs) and, in the same statement, looks up the post's key and the
 * hold it resolves. Both lookups see the statement's snapshot: a post that committed while this one
 * waited for a lock is not in them (the account rows are: FOR UPDATE returns their latest version), so
 * a caller that finds its write refused must read again before it answers (ledger.ts post).
 */
export async function lockForPost(
  q: Db,
  refs: AccountRef[],
  post: { idempotencyKey: string; holdKey: string | null },
): Promise<LockedForPost> {
  const { sql, bindings } = lockStatement(refs, {
    noWait: false,
    lookups: { idempotencyKey: post.idempotencyKey, holdKey: post.holdKey },
  });
  const rows: LockForPostRow[] = (await preparedRaw(q, sql, bindings)).rows;
  const first = rows[0];
  const locked: LockedForPost = {
    accounts: rows.map(
      ({
        key_taken_by: _k,
        hold_resolved_by: _r,
        hold_id: _i,
        hold_reference_type: _t,
        hold_reference_id: _d,
        held_micros: _m,
        held_owner: _o,
        held_currency: _c,
        ...row
      }) => toAccount(row),
    ),
    keyTakenBy: first?.key_taken_by ?? null,
    holdResolvedBy: first?.hold_resolved_by ?? null,
  };
  // With no account row there is no row to carry the hold either: it stays unread (undefined).
  if (post.holdKey !== null && first) {
    locked.hold = first.hold_id
      ? {
          transactionId: first.hold_id,
          referenceType: first.hold_reference_type ?? null,
          referenceId: first.hold_reference_id ?? null,
          heldMicros: first.held_micros == null ? null : BigInt(first.held_micros),
          heldOwner: first.held_owner ?? null,
          heldCurrency: first.held_currency ?? null,
        }
      : null;
  }
  return locked;
}

/** Creates the named accounts that do not exist (first use); race-safe like getOrCreateAccount. */
export async function createAccounts(q: Db, keys: AccountKey[]): Promise<void> {
  if (keys.length === 0) return;
  await q("ledger_accounts")
    .insert(
      keys.map((k) => ({
        owner_agent_id: k.owner,
        kind: k.kind,
        currency: k.currency,
        allow_negative: NEGATIVE_ALLOWED.includes(k.kind),
      })),
    )
    .onConflict()
    .ignore();
}

export type NewTransaction = Pick<
  LedgerTransactionRow,
  "kind" | "idempotency_key" | "reference_type" | "reference_id" | "resolves_transaction_id" | "metadata"
>;

export async function findTransactionByKey(
  q: Db,
  idempotencyKey: string,
): Promise<LedgerTransactionRow | undefined> {
  return q<LedgerTransactionRow>("ledger_transactions").where({ idempotency_key: idempotencyKey }).first();
}

export interface NewEntry {
  account_id: string;
  amount_micros: bigint;
  balance_before_micros: bigint;
  balance_after_micros: bigint;
}

/**
 * Writes a transaction, its entries and each touched account's new balance (its last entry's
 * balance_after) in one statement: the transaction's insert and the entries' are data-modifying CTEs
 * beside the balances' update, and all three happen only if the transaction row was inserted. It is not
 * when its key is already recorded or the hold it resolves is already resolved (ON CONFLICT DO NOTHING,
 * either unique index): then nothing is written and undefined comes back. Strict, it has no ON CONFLICT:
 * either index fails the statement (23505), which aborts the caller's transaction; for a write whose
 * COMMIT is already on its way (PostTransactionInput.commitWithWrite). The caller holds the accounts' row
 * locks and computed the balances under them.
 *
 * Evidence of the movement, when given, is inserted by the same statement and on the same condition
 * (a fourth data-modifying CTE): a row whose source_ref is THIS_TRANSACTION gets the new transaction's
 * id. A paid call's hold and its capture or release each spend one round trip fewer so
 * (docs/benchmarks.md "The nineteenth round"); recording a subject's state again stays a no-op.
 */
export async function writeTransaction(
  q: Db,
  row: NewTransaction,
  entries: NewEntry[],
  evidence: PostEvidence[] = [],
  options: { strict?: boolean } = {},
): Promise<string | undefined> {
  const finalBalance = new Map<string, bigint>();
  for (const e of entries) finalBalance.set(e.account_id, e.balance_after_micros);
  const text = writeText(entries.length, finalBalance.size, evidence.length, options.strict === true);
  const result = await preparedRaw(q, text, [
    row.kind,
    row.idempotency_key,
    row.reference_type,
    row.reference_id,
    row.resolves_transaction_id,
    JSON.stringify(row.metadata),
    ...entries.flatMap((e, ord) => [
      ord,
      e.account_id,
      e.amount_micros.toString(),
      e.balance_before_micros.toString(),
      e.balance_after_micros.toString(),
    ]),
    ...[...finalBalance].flatMap(([id, balance]) => [id, balance.toString()]),
    ...insertWithTransactionValues(evidence),
  ]);
  return result.rows[0]?.id;
}

/** writeTransaction's text per shape (entries, accounts, evidence rows): built once, not per post. */
const writeTexts = new Map<string, string>();

function writeText(entries: number, accounts: number, evidence: number, strict: boolean): string {
  const shape = `${entries}/${accounts}/${evidence}/${strict}`;
  let sql = writeTexts.get(shape);
  if (!sql) {
    const entryRows = Array(entries).fill("(?::int, ?::uuid, ?::bigint, ?::bigint, ?::bigint)").join(", ");
    const balanceRows = Array(accounts).fill("(?::uuid, ?::bigint)").join(", ");
    sql = `with tx as (
       insert into ledger_transactions
         (kind, idempotency_key, reference_type, reference_id, resolves_transaction_id, metadata)
       values (?, ?, ?, ?, ?::uuid, ?::jsonb)${strict ? "" : "\n       on conflict do nothing"}
       returning id
     ),
     ${writtenWithTx(
       `select tx.id, e.account_id, e.amount, e.before, e.after
         from tx cross join (values ${entryRows}) as e (ord, account_id, amount, before, after)
        order by e.ord`,
       `update ledger_accounts a set balance_micros = b.balance
         from (values ${balanceRows}) as b (id, balance), tx
        where a.id = b.id`,
       evidence,
     )}
     select id from tx`;
    writeTexts.set(shape, sql);
  }
  return sql;
}

/**
 * The CTEs that follow a write's `tx` (the transaction's insert): its entries (`entries` selects them,
 * in order), the balances (`balances` updates them) and its evidence; each writes only if `tx` has a row.
 */
function writtenWithTx(entries: string, balances: string, evidence: number): string {
  return `written as (
       insert into ledger_entries
         (transaction_id, account_id, amount_micros, balance_before_micros, balance_after_micros)
       ${entries}
     ),
     balances as (
       ${balances}
     )${
       evidence > 0
         ? `,
     evidence as (
       ${insertWithTransaction(evidence)}
     )`
         : ""
     }`;
}

/** How a post written in one flight names the hold it resolves (none for a hold itself). */
export type InFlightResolves = null | {
  key: string;
  /** What the caller's records say the hold holds: the write goes on only when it holds exactly that. */
  expected: {
    owner: string;
    currency: Currency;
    amountMicros: bigint;
    referenceType: string | null;
    referenceId: string | null;
  };
};

/**
 * Why a write sent in one flight refused to write (its refuse_unless reason): each is something the
 * two-step post answers itself, after its lock (ledger.ts postOnce), so the caller's transaction runs again
 * and its post takes two steps.
 */
export const IN_FLIGHT_REFUSALS = {
  /** A leg's account does not exist yet (first use: the two-step post creates it). */
  accountMissing: "ledger: an account of the post does not exist",
  /** The legs' accounts are in more than one currency (a programming error, told by the two-step post). */
  currencies: "ledger: the accounts of the post are in more than one currency",
  /** A leg would take an account below zero (PAYMENT_REQUIRED, or a replay, as the two-step post finds). */
  shortFunds: "ledger: a leg would take an account below zero",
  /** The hold named by key is not there, or holds something else than the caller expected. */
  holdNotAsExpected: "ledger: the hold is not what its caller expected",
} as const;

/** One post of writeTransactionsInFlight: its transaction, its legs, the hold it resolves, its evidence. */
export interface InFlightPost {
  row: Omit<NewTransaction, "resolves_transaction_id">;
  legs: { account: AccountRef; amountMicros: bigint }[];
  resolves: InFlightResolves;
  evidence?: PostEvidence[];
}

/**
 * Writes a transaction whose balances the statement reads itself, for a post sent in one flight with its
 * lock (the accounts' FOR UPDATE, the statement just before it in the same transaction: this statement's
 * snapshot, taken after that lock was granted, holds the locked rows' latest balances). It computes each
 * entry's running balance, checks every rule the two-step post checks in ledger.ts (every account there,
 * one currency, no account that may not go negative taken below zero, the hold as expected) and writes
 * like writeTransaction, strictly: a key or a hold already taken fails it (23505). A rule broken fails it
 * too, by refuse_unless with one of IN_FLIGHT_REFUSALS, so that nothing behind it in its flight commits.
 */
export async function writeTransactionInFlight(q: Db, post: InFlightPost): Promise<string> {
  const bindings: Knex.RawBinding[] = [];
  const shape: string[] = [];
  post.legs.forEach((leg, ord) => {
    const account = leg.account;
    bindings.push(0, ord);
    if ("id" in account) {
      shape.push("i");
      bindings.push(account.id);
    } else {
      shape.push(account.owner === null ? "p" : "o");
      bindings.push(account.kind, account.currency, ...(account.owner === null ? [] : [account.owner]));
    }
    bindings.push(leg.amountMicros.toString());
  });
  // The `post` CTE's one row, in its columns' order (postDocument's fields, the metadata as text).
  const p = postDocument(post, 0);
  bindings.push(
    p.post,
    p.kind,
    p.idempotency_key,
    p.reference_type,
    p.reference_id,
    JSON.stringify(p.metadata),
    p.hold_key,
    p.hold_amount,
    p.hold_owner,
    p.hold_currency,
    p.hold_reference_type,
    p.hold_reference_id,
  );
  const evidence = post.evidence ?? [];
  bindings.push(...insertWithTransactionValues(evidence));
  const text = onePostText(shape.join(""), post.resolves !== null, evidence.length);
  const result = await preparedRaw(q, text, bindings);
  const ids = result.rows[0].ids as string[];
  if (ids?.length !== 1) throw new Error("ledger: a write in flight answered no transaction");
  return ids[0]!;
}

/**
 * writeTransactionInFlight for several posts in one statement (a paid group's holds or captures:
 * ledger.ts postTogether; docs/benchmarks.md "The thirty-second round"): each post's entries run on from
 * the balances the posts before it left, and each account's balance is written once, by the sum of every
 * post's legs on it. Updating one row many times in one transaction leaves a chain of row versions that
 * every later read and update of it walks; the group's accounts (a buyer's, the platform's fee account)
 * are the same rows post after post. All or nothing: any post's broken rule fails the statement. Answers
 * the posts' transaction ids, in order.
 *
 * The legs, the posts and the evidence go as three JSON arrays, so the statement has one text however
 * many posts, legs and evidence rows it writes, and each connection keeps one plan for it: a text per
 * count sent a group of 7 as three statements (4, 2, 1), each one more executor start-up, one more
 * version of every shared account row and one more set of index and constraint set-ups, while the
 * group's accounts were locked (docs/benchmarks.md "The thirty-third round"). A lone post keeps its own
 * text (writeTransactionInFlight), whose plan knows it writes one post.
 */
export async function writeTransactionsInFlight(q: Db, posts: readonly InFlightPost[]): Promise<string[]> {
  if (posts.length === 1) return [await writeTransactionInFlight(q, posts[0]!)];
  const legs: Record<string, unknown>[] = [];
  const rows: Record<string, unknown>[] = [];
  const evidence: Record<string, unknown>[] = [];
  posts.forEach((p, post) => {
    p.legs.forEach((leg, ord) => {
      const account = leg.account;
      const amount = leg.amountMicros.toString();
      legs.push(
        "id" in account
          ? { post, ord, account_id: account.id, amount }
          : { post, ord, owner: account.owner, kind: account.kind, currency: account.currency, amount },
      );
    });
    rows.push(postDocument(p, post));
    evidence.push(...evidenceDocument(p.evidence ?? [], post));
  });
  const result = await preparedRaw(q, MANY_POSTS_SQL, [
    JSON.stringify(legs),
    JSON.stringify(rows),
    JSON.stringify(evidence),
  ]);
  const ids = result.rows[0].ids as string[];
  if (ids?.length !== posts.length)
    throw new Error("ledger: a write in flight answered too few transactions");
  return ids;
}

/** A post's own columns and the hold it expects, in the `post` CTE's order (bigints as strings). */
function postDocument(p: InFlightPost, post: number) {
  const e = p.resolves?.expected;
  return {
    post,
    kind: p.row.kind,
    idempotency_key: p.row.idempotency_key,
    reference_type: p.row.reference_type,
    reference_id: p.row.reference_id,
    metadata: p.row.metadata,
    hold_key: p.resolves?.key ?? null,
    hold_amount: e?.amountMicros.toString() ?? null,
    hold_owner: e?.owner ?? null,
    hold_currency: e?.currency ?? null,
    hold_reference_type: e?.referenceType ?? null,
    hold_reference_id: e?.referenceId ?? null,
  };
}

/**
 * What a write in flight does once it has its `leg` (post, ord, account_id, amount) and `post` rows
 * (postDocument's columns): every rule checked, the transactions, entries, balances and evidence written,
 * the transactions' ids answered in post order, or a refusal (IN_FLIGHT_REFUSALS). Each hold named by key
 * is looked up post by post (a lateral subquery that `offset 0` keeps whole): the many posts' plan guesses
 * a JSON array at 100 rows, and with that guess PostgreSQL scanned the whole transactions table for them
 * whenever its statistics made the table look small. `evidence` is the body of the evidence CTE.
 */
function inFlightStatement(head: string, resolves: boolean, evidence: string | null): string {
  const r = IN_FLIGHT_REFUSALS;
  const hold = resolves
    ? `,
     hold as (
       select post.post, t.id, t.reference_type, t.reference_id, h.amount_micros, h.owner_agent_id, h.currency
         from post cross join lateral (
                select t.id, t.reference_type, t.reference_id from ledger_transactions t
                 where t.idempotency_key = post.hold_key and t.kind = 'hold' offset 0
              ) t
         ${HELD_ENTRY}
     )`
    : "";
  const holdRule = resolves
    ? `
         when exists (
           select 1 from post
            where post.hold_key is not null and not exists (
              select 1 from hold
               where hold.post = post.post and hold.amount_micros = post.hold_amount
                 and hold.owner_agent_id = post.hold_owner and hold.currency = post.hold_currency
                 and hold.reference_type is not distinct from post.hold_reference_type
                 and hold.reference_id is not distinct from post.hold_reference_id
            )
         ) then '${r.holdNotAsExpected}'`
    : "";
  const resolvesValue = resolves ? "(select hold.id from hold where hold.post = post.post)" : "null::uuid";
  return `${head},
     run as (
       select leg.post, leg.ord, leg.account_id, leg.amount, a.currency, a.allow_negative,
              a.balance_micros + coalesce(sum(leg.amount) over (
                partition by leg.account_id order by leg.post, leg.ord
                rows between unbounded preceding and 1 preceding
              ), 0)::bigint as before
         from leg join ledger_accounts a on a.id = leg.account_id
     )${hold},
     verdict as (
       select case
         when (select count(*) from run) <> (select count(*) from leg) then '${r.accountMissing}'
         when exists (
           select 1 from run group by post having count(distinct currency) <> 1
         ) then '${r.currencies}'
         when exists (select 1 from run where before + amount < 0 and not allow_negative) then '${r.shortFunds}'${holdRule}
       end as refused
     ),
     tx as (
       insert into ledger_transactions
         (kind, idempotency_key, reference_type, reference_id, resolves_transaction_id, metadata)
       select post.kind, post.idempotency_key, post.reference_type, post.reference_id, ${resolvesValue},
              post.metadata
         from post
        where (select refused from verdict) is null
        order by post.post
       returning id, idempotency_key
     ),
     txp as (
       select post.post, tx.id from tx join post on post.idempotency_key = tx.idempotency_key
     ),
     written as (
       insert into ledger_entries
         (transaction_id, account_id, amount_micros, balance_before_micros, balance_after_micros)
       select txp.id, run.account_id, run.amount, run.before, run.before + run.amount
         from txp join run on run.post = txp.post
        order by run.post, run.ord
     ),
     balances as (
       update ledger_accounts a set balance_micros = a.balance_micros + d.delta
         from (select account_id, sum(amount)::bigint as delta from run group by account_id) d
        where a.id = d.account_id and exists (select 1 from tx)
     )${
       evidence
         ? `,
     evidence as (
       ${evidence}
     )`
         : ""
     }
     select (select array_agg(txp.id order by txp.post) from txp) as ids
      where refuse_unless((select refused from verdict) is null, (select refused from verdict))`;
}

/** writeTransactionInFlight's text per shape (its legs' account names, a hold resolved, evidence rows). */
const onePostTexts = new Map<string, string>();

function onePostText(legShape: string, resolves: boolean, evidence: number): string {
  const shape = `${legShape}/${resolves}/${evidence}`;
  let sql = onePostTexts.get(shape);
  if (!sql) {
    const account = (leg: string) =>
      leg === "i"
        ? "?::uuid"
        : `(select id from ledger_accounts where kind = ? and currency = ? and owner_agent_id ${
            leg === "p" ? "is null" : "= ?::uuid"
          })`;
    const legRows = [...legShape].map((leg) => `(?::int, ?::int, ${account(leg)}, ?::bigint)`).join(", ");
    const head = `with leg (post, ord, account_id, amount) as (
       values ${legRows}
     ),
     post (post, kind, idempotency_key, reference_type, reference_id, metadata,
           hold_key, hold_amount, hold_owner, hold_currency, hold_reference_type, hold_reference_id) as (
       values (?::int, ?::ledger_transaction_kind, ?, ?::text, ?::text, ?::jsonb, ?::text, ?::bigint, ?::uuid,
               ?::ledger_currency, ?::text, ?::text)
     )`;
    sql = inFlightStatement(head, resolves, evidence > 0 ? insertWithTransaction(evidence) : null);
    onePostTexts.set(shape, sql);
  }
  return sql;
}

/**
 * writeTransactionsInFlight's text: one for every group. A leg names its account by id or by owner, kind
 * and currency (looked up only then: a CASE runs the subquery of its branch alone).
 */
export const MANY_POSTS_SQL = (() => {
  const byKey = (owner: string) =>
    `(select a.id from ledger_accounts a where ${owner} and a.kind = l.kind and a.currency = l.currency)`;
  const head = `with leg as (
       select l.post, l.ord, l.amount,
              coalesce(l.account_id, case when l.owner is null
                then ${byKey("a.owner_agent_id is null")}
                else ${byKey("a.owner_agent_id = l.owner")} end) as account_id
         from jsonb_to_recordset(?::jsonb) as l (
                post int, ord int, account_id uuid, owner uuid, kind ledger_account_kind,
                currency ledger_currency, amount bigint
              )
     ),
     post as (
       select * from jsonb_to_recordset(?::jsonb) as p (
                post int, kind ledger_transaction_kind, idempotency_key text, reference_type text,
                reference_id text, metadata jsonb, hold_key text, hold_amount bigint, hold_owner uuid,
                hold_currency ledger_currency, hold_reference_type text, hold_reference_id text
              )
     )`;
  return inFlightStatement(head, true, insertWithPostsFromJson("?::jsonb"));
})();

/** Every account an agent owns in one currency. */
export async function agentAccounts(q: Db, agentId: string, currency: Currency): Promise<LedgerAccountRow[]> {
  const rows = await q("ledger_accounts").where({ owner_agent_id: agentId, currency }).select("*");
  return rows.map(toAccount);
}

/** Every account the given agents own, in every currency. */
export async function accountsOwnedBy(q: Db, agentIds: string[]): Promise<LedgerAccountRow[]> {
  const rows = await q("ledger_accounts").whereIn("owner_agent_id", agentIds).orderBy("id").select("*");
  return rows.map(toAccount);
}

/** A transaction's entries in write order, with each entry's account kind, owner and currency. */
export function transactionEntries(q: Db, transactionId: string): Promise<LedgerEntryView[]> {
  return entriesOfTransactions(q, [transactionId]);
}

/** The entries of many transactions in write order, with their accounts' kind, owner and currency. */
export async function entriesOfTransactions(q: Db, transactionIds: string[]): Promise<LedgerEntryView[]> {
  const rows = await q("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .whereIn("e.transaction_id", transactionIds)
    .orderBy("e.id")
    .select("e.*", "a.kind", "a.owner_agent_id", "a.currency");
  return rows.map((r) => toEntry<LedgerEntryView>(r));
}

/** How many entries the given accounts have. */
export async function countEntries(q: Db, accountIds: string[]): Promise<number> {
  const [row] = await q("ledger_entries").whereIn("account_id", accountIds).count<{ count: string }[]>("*");
  return Number(row?.count ?? 0);
}

/** Σ amount of the given transactions' entries, per currency (zero for every currency, always). */
export async function sumEntriesByCurrency(q: Db, transactionIds: string[]): Promise<Map<Currency, bigint>> {
  const rows = await q("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .whereIn("e.transaction_id", transactionIds)
    .groupBy("a.currency")
    .select("a.currency", q.raw("sum(e.amount_micros)::text as total"));
  return new Map(rows.map((r: { currency: Currency; total: string }) => [r.currency, BigInt(r.total)]));
}

/** True when a transaction (committed, or this one's) resolves the hold. */
export async function isResolved(q: Db, holdTransactionId: string): Promise<boolean> {
  const row = await q("ledger_transactions")
    .where({ resolves_transaction_id: holdTransactionId })
    .first("id");
  return row !== undefined;
}
