import type { Knex } from "knex";
import { db } from "../../db/knex.js";
import { commitWithThisFlight, inOneFlight } from "../../db/pipeline.js";
import { refusalOf } from "../../db/refusals.js";
import { AppError } from "../../errors.js";
import { formatUsdc } from "../../kernel/money.js";
import { appendEvidence, namingTransaction, type PostEvidence } from "../evidence/store.js";
import { byKnownId, forgetAccountIds, learnAccountIds } from "./account-ids.js";
import {
  type AccountKey,
  type AccountRef,
  type AgentAccountKind,
  agentAccounts,
  type Currency,
  createAccounts,
  findTransactionByKey,
  getOrCreateAccount,
  IN_FLIGHT_REFUSALS,
  type InFlightPost,
  type InFlightResolves,
  isResolved,
  type LedgerAccountRow,
  type LedgerEntryView,
  type LedgerTransactionRow,
  type LockedForPost,
  lockAccountRefs,
  lockForPost,
  type NewEntry,
  type PlatformAccountKind,
  type TransactionKind,
  transactionEntries,
  writeTransaction,
  writeTransactionInFlight,
  writeTransactionsInFlight,
} from "./store.js";

export type {
  AccountKey,
  AccountRef,
  AgentAccountKind,
  Currency,
  LedgerAccountRow,
  PlatformAccountKind,
  TransactionKind,
};

/** One string per account name: the same for a key and for the row it names (see accountNames). */
function refName(ref: AccountRef): string {
  return "id" in ref ? `id:${ref.id}` : `key:${ref.owner ?? ""}/${ref.kind}/${ref.currency}`;
}

/** Both names an account answers to. */
function accountNames(
  row: Pick<LedgerAccountRow, "id" | "owner_agent_id" | "kind" | "currency">,
): [string, string] {
  return [
    refName({ id: row.id }),
    refName({ owner: row.owner_agent_id, kind: row.kind, currency: row.currency }),
  ];
}

/** The platform's share of a captured payment, in percent (the seller gets the rest). */
export const PLATFORM_FEE_PERCENT = 3n;

/** What a transaction is about, e.g. { type: "invocation", id }. */
export interface LedgerReference {
  type: string;
  id: string;
}

/** What a hold holds, as a caller knows it from its own records: whose funds, which unit, how much, for what. */
export interface HeldFunds {
  agentId: string;
  currency: Currency;
  amountMicros: bigint;
  reference: LedgerReference | null;
}

/** One signed amount on one account (by id or by key): negative debits it, positive credits it. */
export interface LedgerLeg {
  account: AccountRef;
  amountMicros: bigint;
}

export interface PostTransactionInput {
  kind: TransactionKind;
  /** The same key posts once: a second post returns the first transaction (replayed: true). */
  idempotencyKey: string;
  reference?: LedgerReference | null;
  legs: LedgerLeg[];
  metadata?: Record<string, unknown>;
  /**
   * For a capture or release: the hold it resolves, by the hold's key, and what the caller's own records
   * say it holds (the legs were built on that). The hold is not read first: the lock's statement reads
   * it, and the post goes on only when it is there and holds exactly that. A hold is resolved once,
   * either way.
   */
  resolvesHold?: { key: string; expected: HeldFunds };
  /**
   * Statements the caller sent in its transaction just before the post: the post's lock goes out in
   * their flight instead of waiting for their answers, and the post goes on only once every one of them
   * has succeeded (inOneFlight); else it fails with the first one's error and writes nothing. A caller's
   * post only. They come before the lock in PostgreSQL's order, as they would have one by one, when they
   * were asked for before the post and each is a named statement like the post's own (preparedRaw): a
   * statement goes out when it reaches the driver, and a knex query builder takes more steps to reach it.
   */
  before?: Promise<unknown>;
  /**
   * Evidence of the movement, written in the post's own statement (writeTransaction); a row whose
   * source_ref is THIS_TRANSACTION names the post's transaction. A replayed post appends it (a no-op
   * when it is already there), so the evidence is there either way; a refused post writes none.
   */
  evidence?: PostEvidence[];
  /**
   * The caller's own statements for its transaction (a caller's post only), sent in one flight with the
   * post's write, once the accounts are locked and the legs accepted: they wait for no extra round trip.
   * They run once in every post that returns, a replay included, and never after a refusal. They must
   * not touch the ledger's rows: a paid transaction locks its ledger accounts before any other row it
   * locks (docs/payments.md "Ledger", locking).
   */
  withWrite?: () => Promise<unknown>;
  /**
   * The post's write (with withWrite's statements) is the last thing the caller's transaction sends: its
   * COMMIT goes out in the write's flight (commitWithThisFlight), a round trip sooner, and the accounts'
   * locks are held that much less. The write is then strict: a key or a hold taken since the lock (by a
   * post that committed while this one waited) fails it instead of answering "taken", the COMMIT rolls the
   * whole transaction back, and the post throws TakenSinceLock, which retryTransient runs again (the lock
   * then sees the first post). Nothing of the caller's may follow the post in its transaction. A post that
   * writes nothing (a replay, a refusal) sends no COMMIT, nor one in a transaction that cannot send it
   * early (a savepoint): the caller's transaction then ends as usual.
   */
  commitWithWrite?: boolean;
  /**
   * With commitWithWrite, the post waits for no answer: its lock, its write, withWrite's statements and
   * the COMMIT go out in `before`'s flight, and the write reads the locked balances and checks the post's
   * rules itself (writeTransactionInFlight). Only for a caller whose `before` and withWrite statements
   * refuse by failing, never by their answer: everything in the flight commits unless a statement of it
   * fails. When the write meets what only the two-step post answers (a refusal, a replay, an account on
   * first use, a hold not as expected), it fails instead, the caller's transaction rolls back whole, and
   * the post throws FlightDeclined (retryable): run again, the same post takes two steps and answers it.
   * In a transaction that cannot send its COMMIT early (a savepoint) the post takes two steps at once.
   */
  oneFlight?: boolean;
}

export interface PostResult {
  transactionId: string;
  replayed: boolean;
}

/** A post past its lock: the id of the hold it resolves, read by that lock (null for a post that resolves none). */
interface Posting extends PostTransactionInput {
  resolves: string | null;
}

/** A capture or release named a hold that a different transaction already captured or released. */
export class HoldAlreadyResolvedError extends Error {
  constructor(readonly holdTransactionId: string) {
    super(`ledger hold ${holdTransactionId} is already captured or released`);
    this.name = "HoldAlreadyResolvedError";
  }
}

/**
 * A strict write (commitWithWrite) met its key or its hold taken by a post that committed after this
 * post's lock: the caller's transaction rolled back whole, and running it again replays or refuses as
 * the lock then sees. Retryable (isRetryableDbError).
 */
export class TakenSinceLock extends Error {
  constructor(
    readonly idempotencyKey: string,
    override readonly cause: unknown,
  ) {
    super(`ledger transaction ${idempotencyKey}: its key or its hold was taken since its lock`);
    this.name = "TakenSinceLock";
  }
}

/**
 * A post sent in one flight (PostTransactionInput.oneFlight) met what only the two-step post answers, or
 * its key or its hold taken: the caller's transaction rolled back whole. Retryable (isRetryableDbError);
 * the attempt run again posts in two steps (twoStepNext).
 */
export class FlightDeclined extends Error {
  constructor(
    readonly idempotencyKey: string,
    override readonly cause: unknown,
  ) {
    super(
      `ledger transaction ${idempotencyKey}, sent in one flight, was declined: ${(cause as Error)?.message ?? String(cause)}`,
    );
    this.name = "FlightDeclined";
  }
}

/**
 * Keys whose post in one flight was declined: the caller's next attempt of it (retryTransient, in this
 * process) takes two steps, which answers the refusal, the replay or the hold as it is. A hint only, so
 * bounded: a key dropped from it makes its next attempt try one flight again, and be declined again.
 */
const twoStepNext = new Set<string>();
const TWO_STEP_HINTS = 1000;

function postInTwoStepsNext(idempotencyKey: string): void {
  if (twoStepNext.size >= TWO_STEP_HINTS) twoStepNext.delete(twoStepNext.values().next().value!);
  twoStepNext.add(idempotencyKey);
}

/** The unique indexes a ledger write can meet: its key, and the hold it resolves (resolved once). */
const TAKEN_CONSTRAINTS = new Set([
  "ledger_transactions_idempotency_key",
  "ledger_transactions_resolves_once",
]);

function isTaken(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown } | null;
  return e?.code === "23505" && TAKEN_CONSTRAINTS.has(e.constraint as string);
}

/** Splits a captured amount: fee = floor(amount × 3 / 100) to the platform, the rest to the seller. */
export function platformSplit(amountMicros: bigint): { feeMicros: bigint; sellerMicros: bigint } {
  if (amountMicros < 0n) throw new Error(`cannot split a negative amount (${amountMicros})`);
  // bigint division truncates toward zero, which is floor for a non-negative amount.
  const feeMicros = (amountMicros * PLATFORM_FEE_PERCENT) / 100n;
  return { feeMicros, sellerMicros: amountMicros - feeMicros };
}

/** An agent's account of one kind and currency, created on first use. */
export function accountFor(
  agentId: string,
  kind: AgentAccountKind,
  currency: Currency,
  trx?: Knex.Transaction,
): Promise<LedgerAccountRow> {
  return getOrCreateAccount(trx ?? db(), agentId, kind, currency);
}

/** The platform's account of one kind and currency (revenue or chain clearing), created on first use. */
export function platformAccount(
  kind: PlatformAccountKind,
  currency: Currency,
  trx?: Knex.Transaction,
): Promise<LedgerAccountRow> {
  return getOrCreateAccount(trx ?? db(), null, kind, currency);
}

/** An agent's balances in one currency, in micros (zero for accounts not yet used). */
export async function balances(
  agentId: string,
  currency: Currency,
  trx?: Knex.Transaction,
): Promise<{ available: bigint; held: bigint; payable: bigint; bonds: bigint }> {
  const rows = await agentAccounts(trx ?? db(), agentId, currency);
  const of = (kind: AgentAccountKind) => rows.find((r) => r.kind === kind)?.balance_micros ?? 0n;
  return {
    available: of("agent_available"),
    held: of("agent_held"),
    payable: of("seller_payable"),
    bonds: of("bonds"),
  };
}

// 55P03 (lock not available) comes from a NOWAIT lock: the ledger takes an account created by another
// transaction that way, out of id order, rather than risk a deadlock (lockLegAccounts).
const RETRYABLE_CODES = new Set(["40001", "40P01", "55P03"]);
const MAX_ATTEMPTS = 5;

/**
 * True for serialization failures (40001), deadlocks (40P01), NOWAIT refusals (55P03), a strict write
 * raced since its lock (TakenSinceLock) and a post declined in one flight (FlightDeclined): safe to run
 * again.
 */
export function isRetryableDbError(error: unknown): boolean {
  return (
    error instanceof TakenSinceLock ||
    error instanceof FlightDeclined ||
    RETRYABLE_CODES.has((error as { code?: unknown } | null)?.code as string)
  );
}

/** Runs a whole transaction again when isRetryableDbError, up to 5 attempts, with jittered pauses. */
export async function retryTransient<T>(run: () => Promise<T>, maxAttempts = MAX_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= maxAttempts || !isRetryableDbError(error)) throw error;
      const pauseMs = Math.random() * 5 * 2 ** attempt;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}

function checkLegs(input: PostTransactionInput): void {
  if (input.legs.length < 2) throw new Error("a ledger transaction needs at least two legs");
  let sum = 0n;
  for (const leg of input.legs) {
    if (typeof leg.amountMicros !== "bigint" || leg.amountMicros === 0n) {
      throw new Error(`a ledger leg needs a non-zero bigint amount (got ${String(leg.amountMicros)})`);
    }
    sum += leg.amountMicros;
  }
  if (sum !== 0n) throw new Error(`ledger legs must sum to zero (sum ${sum})`);
  if (!input.idempotencyKey) throw new Error("a ledger transaction needs an idempotency key");
}

/**
 * Posts a double-entry transaction: legs sum to zero in one currency (else a plain Error: a programming
 * error), accounts locked in id order, and a leg that would take a non-negative account below zero
 * refuses the whole transaction with PAYMENT_REQUIRED, writing nothing. Given a caller's transaction it
 * joins it and never retries: the caller owns the retry. A refusal comes before any write (apart from
 * accounts created on first use) and no statement of a post is expected to fail, so the caller's work
 * stays intact without a savepoint. Alone it runs its own transaction and retries it (retryTransient).
 */
export async function postTransaction(
  input: PostTransactionInput,
  trx?: Knex.Transaction,
): Promise<PostResult> {
  checkLegs(input);
  if (input.oneFlight && !input.commitWithWrite) throw new Error("oneFlight needs commitWithWrite");
  if (trx) return post(trx, input);
  if (input.withWrite || input.before || input.commitWithWrite)
    throw new Error("withWrite, before and commitWithWrite need the caller's transaction");
  return retryTransient(() => db().transaction((own) => post(own, input)));
}

/**
 * A post, and its evidence: written with it, or appended after a replay (the first post may have had
 * none); and the caller's withWrite statements, sent with the write or, when there was none, after.
 */
async function post(q: Knex.Transaction, input: PostTransactionInput): Promise<PostResult> {
  const caller = input.withWrite;
  let sent: Promise<unknown> | undefined;
  const withWrite = caller && (() => (sent ??= caller()));
  const result = await postOnce(q, input, withWrite);
  if (withWrite) await withWrite();
  if (result.replayed && input.evidence?.length)
    await appendEvidence(q, namingTransaction(input.evidence, result.transactionId));
  return result;
}

/**
 * Two round trips when nothing is in the way: one statement locks the accounts and reads whether the
 * key or the hold is taken, one writes the transaction, its entries, the balances and the evidence.
 * What the lock's snapshot cannot show (a post that committed while this one waited for a lock) is read
 * again, afresh, before a refusal and when the write finds its key or its hold taken. The lock goes out
 * in the flight of the caller's `before` statements, when it gives them.
 */
async function postOnce(
  q: Knex.Transaction,
  asked: PostTransactionInput,
  withWrite: (() => Promise<unknown>) | undefined,
): Promise<PostResult> {
  if (asked.oneFlight && !twoStepNext.delete(asked.idempotencyKey) && commitWithThisFlight(q))
    return postInOneFlight(q, asked, withWrite);
  const locking = lockLegAccounts(q, asked);
  const locked = asked.before ? (await inOneFlight(asked.before, locking))[1] : await locking;
  // The hold named by key is resolved by its id from here on: the lock's statement read it.
  const input: Posting = {
    ...asked,
    resolves: asked.resolvesHold ? heldAsExpected(asked.resolvesHold, locked.hold) : null,
  };
  if (locked.keyTakenBy) return replay(q, input);
  if (locked.holdResolvedBy && input.resolves) throw new HoldAlreadyResolvedError(input.resolves);
  const currencies = new Set([...locked.accounts.values()].map((a) => a.currency));
  if (currencies.size !== 1) {
    throw new Error(`a ledger transaction cannot mix currencies (${[...currencies].join(", ")})`);
  }

  let entries: NewEntry[];
  try {
    entries = entriesFor(input.legs, locked.accounts);
  } catch (refusal) {
    const first = await answerOfFirstPost(q, input);
    if (first) return first;
    throw refusal;
  }
  // Sent at the end of this tick, behind the write and withWrite's statements (commitWithThisFlight);
  // false when the caller's transaction cannot (a savepoint), which then commits as usual.
  const commits = input.commitWithWrite === true && commitWithThisFlight(q);
  const write = writeTransaction(
    q,
    {
      kind: input.kind,
      idempotency_key: input.idempotencyKey,
      reference_type: input.reference?.type ?? null,
      reference_id: input.reference?.id ?? null,
      resolves_transaction_id: input.resolves,
      metadata: input.metadata ?? {},
    },
    entries,
    input.evidence,
    { strict: commits },
  );
  const flight = withWrite ? inOneFlight(write, withWrite()).then(([id]) => id) : write;
  if (commits) {
    const id = await flight.catch((error: unknown) => {
      throw isTaken(error) ? new TakenSinceLock(input.idempotencyKey, error) : error;
    });
    // A strict write that did not fail wrote its transaction.
    return { transactionId: id!, replayed: false };
  }
  const id = await flight;
  if (id) return { transactionId: id, replayed: false };
  const first = await answerOfFirstPost(q, input);
  if (first) return first;
  throw new Error(`ledger transaction ${input.idempotencyKey} met a unique index, but nothing holds it`);
}

/**
 * One round trip for the whole post (PostTransactionInput.oneFlight), its COMMIT already asked for: the
 * lock, the write that reads the locked balances, withWrite's statements, behind `before`'s. The first
 * failure in that order is the answer; a write that refused, or met its key or its hold taken, declines
 * the post (FlightDeclined), and the caller's next attempt posts in two steps.
 */
async function postInOneFlight(
  q: Knex.Transaction,
  asked: PostTransactionInput,
  withWrite: (() => Promise<unknown>) | undefined,
): Promise<PostResult> {
  const input = withKnownIds(asked);
  const statements: Promise<unknown>[] = input.before ? [input.before] : [];
  // In this order: the lock is asked for first, so it runs first, and the write sees its rows locked.
  statements.push(lockAccountRefs(q, legAccounts(input)).then(learnAccountIds));
  const writing = (async () => {
    try {
      return await writeInFlight(q, input);
    } catch (error) {
      if (namesKeptIds(asked, input)) forgetIfAccountMissing(error);
      const refusal = refusalOf(error);
      if (!isTaken(error) && !(refusal && Object.values(IN_FLIGHT_REFUSALS).includes(refusal as never)))
        throw error;
      postInTwoStepsNext(input.idempotencyKey);
      throw new FlightDeclined(input.idempotencyKey, error);
    }
  })();
  statements.push(writing);
  if (withWrite) statements.push(withWrite());
  const answers = await inOneFlight(...statements);
  return { transactionId: answers[input.before ? 2 : 1] as string, replayed: false };
}

/**
 * Several posts in one flight of the caller's transaction, which they end (a paid call's holds or
 * successes that arrive together, both kinds in one group: shared/routing/paid-group.ts;
 * docs/benchmarks.md "The twenty-ninth round" and "The fortieth round"): behind `before`, one
 * statement that locks every account any of them moves, in id order, so that a group waits on no other
 * post or group in a cycle; then the posts' writes, in one statement, each reading the balances
 * as the posts before it left them (writeTransactionsInFlight); the posts' withWrite statements; the
 * group's own (withWrites: what would otherwise be each post's withWrite, written once for all); and the
 * COMMIT. All or nothing:
 * a post the one-flight write declines (a refusal, a replay, an account on first use, a hold not as
 * expected) or any other failure rolls the whole transaction back and is thrown as it is, and the caller
 * then runs each post alone (postTransaction), which answers it. Answers each post, in order (none is a
 * replay: a replay is declined). The lock's text depends on how many accounts the group names, a set
 * bounded by group-commit.ts's maxBatch, so it stays a named statement.
 */
export async function postTogether(
  inputs: readonly PostTransactionInput[],
  trx: Knex.Transaction,
  before?: Promise<unknown>,
  withWrites?: () => Promise<unknown>,
): Promise<PostResult[]> {
  for (const input of inputs) {
    checkLegs(input);
    if (input.before || input.commitWithWrite || input.oneFlight)
      throw new Error("postTogether: `before` and the COMMIT are the group's, not a post's");
  }
  if (new Set(inputs.map((input) => input.idempotencyKey)).size !== inputs.length)
    throw new Error("postTogether: an idempotency key appears twice");
  const holds = inputs.flatMap((input) => (input.resolvesHold ? [input.resolvesHold.key] : []));
  if (new Set(holds).size !== holds.length) throw new Error("postTogether: a hold is resolved twice");
  if (!commitWithThisFlight(trx))
    throw new Error("postTogether needs a top-level transaction that sends its COMMIT with its flight");
  const posts = inputs.map(withKnownIds);
  const accounts = new Map(posts.flatMap(legAccounts).map((ref) => [refName(ref), ref]));
  // In this order: the lock is asked for first, so it runs first, and every write sees its rows locked.
  const statements: Promise<unknown>[] = before ? [before] : [];
  statements.push(lockAccountRefs(trx, [...accounts.values()]).then(learnAccountIds));
  // The posts' writes, in one statement (writeTransactionsInFlight).
  const writes = statements.length;
  statements.push(writeTransactionsInFlight(trx, posts.map(inFlightPost)));
  for (const input of inputs) if (input.withWrite) statements.push(input.withWrite());
  if (withWrites) statements.push(withWrites());
  const answers = await inOneFlight(...statements).catch((error: unknown) => {
    if (posts.some((post, i) => namesKeptIds(inputs[i]!, post))) forgetIfAccountMissing(error);
    throw error;
  });
  return (answers[writes] as string[]).map((transactionId) => ({ transactionId, replayed: false }));
}

/**
 * The post with its legs' accounts named by id where this process knows them (account-ids.ts): for the
 * posts sent in one flight, whose write refuses an account it does not find instead of making it.
 */
function withKnownIds(input: PostTransactionInput): PostTransactionInput {
  return { ...input, legs: input.legs.map((leg) => ({ ...leg, account: byKnownId(leg.account) })) };
}

/** Whether withKnownIds named any of the post's accounts by a kept id (it keeps a ref it did not replace). */
function namesKeptIds(asked: PostTransactionInput, sent: PostTransactionInput): boolean {
  return sent.legs.some((leg, i) => leg.account !== asked.legs[i]!.account);
}

/**
 * A one-flight write that named accounts by kept ids and found an account missing may have met a stale
 * id: every kept id is forgotten. A flight that named every account as its caller did (an account on
 * first use) forgets none.
 */
function forgetIfAccountMissing(error: unknown): void {
  if (refusalOf(error) === IN_FLIGHT_REFUSALS.accountMissing) forgetAccountIds();
}

/** A post's write that reads its locked balances and checks its rules itself (writeTransactionInFlight). */
function writeInFlight(q: Knex.Transaction, input: PostTransactionInput): Promise<string> {
  return writeTransactionInFlight(q, inFlightPost(input));
}

/** A post as the write in flight takes it. */
function inFlightPost(input: PostTransactionInput): InFlightPost {
  return {
    row: {
      kind: input.kind,
      idempotency_key: input.idempotencyKey,
      reference_type: input.reference?.type ?? null,
      reference_id: input.reference?.id ?? null,
      metadata: input.metadata ?? {},
    },
    legs: input.legs,
    resolves: resolvesInFlight(input),
    evidence: input.evidence,
  };
}

/** How a post in one flight names the hold it resolves: by key with what it holds, or none. */
function resolvesInFlight(input: PostTransactionInput): InFlightResolves {
  if (!input.resolvesHold) return null;
  const { key, expected } = input.resolvesHold;
  return {
    key,
    expected: {
      owner: expected.agentId,
      currency: expected.currency,
      amountMicros: expected.amountMicros,
      referenceType: expected.reference?.type ?? null,
      referenceId: expected.reference?.id ?? null,
    },
  };
}

/**
 * When a post that committed first took this post's key, the replay; when it resolved this post's hold
 * under another key, HoldAlreadyResolvedError. Read afresh: under READ COMMITTED a new statement sees
 * what committed since the lock was taken. Undefined when neither happened.
 */
async function answerOfFirstPost(q: Knex.Transaction, input: Posting): Promise<PostResult | undefined> {
  const existing = await findTransactionByKey(q, input.idempotencyKey);
  if (existing) return replay(q, input, existing);
  if (input.resolves && (await isResolved(q, input.resolves)))
    throw new HoldAlreadyResolvedError(input.resolves);
  return undefined;
}

/**
 * The id of the hold the lock's statement read by key, once it is there and holds what the caller
 * expected: the legs were built on that, so anything else is a programming error, and the caller's
 * transaction rolls back.
 */
function heldAsExpected(
  named: NonNullable<PostTransactionInput["resolvesHold"]>,
  hold: LockedForPost["hold"],
): string {
  // Undefined: the statement locked no row to carry the hold, so none of the legs' accounts existed,
  // and the buyer's held account, which its hold made, is not among them.
  if (hold === undefined)
    throw new Error(`ledger hold ${named.key} is not what its caller expected: none of its accounts exists`);
  if (hold === null) throw new Error(`no ledger hold with key ${named.key}`);
  const { expected } = named;
  const same =
    hold.heldOwner === expected.agentId &&
    hold.heldCurrency === expected.currency &&
    hold.heldMicros === expected.amountMicros &&
    hold.referenceType === (expected.reference?.type ?? null) &&
    hold.referenceId === (expected.reference?.id ?? null);
  if (!same) {
    throw new Error(
      `ledger hold ${named.key} holds ${hold.heldMicros} ${hold.heldCurrency} of ${hold.heldOwner}, not what its caller expected`,
    );
  }
  return hold.transactionId;
}

/** Each leg as an entry with its account's running balance; PAYMENT_REQUIRED when one would go short. */
function entriesFor(legs: LedgerLeg[], accounts: Map<string, LedgerAccountRow>): NewEntry[] {
  const running = new Map([...accounts.values()].map((a) => [a.id, a.balance_micros]));
  return legs.map((leg) => {
    const account = accounts.get(refName(leg.account))!;
    const before = running.get(account.id)!;
    const after = before + leg.amountMicros;
    if (after < 0n && !account.allow_negative) throw insufficientFunds(account, before, -leg.amountMicros);
    running.set(account.id, after);
    return {
      account_id: account.id,
      amount_micros: leg.amountMicros,
      balance_before_micros: before,
      balance_after_micros: after,
    };
  });
}

interface LockedLegs extends Omit<LockedForPost, "accounts"> {
  /** Every locked account under both its names (refName). */
  accounts: Map<string, LedgerAccountRow>;
}

/** The legs' accounts, each once. */
function legAccounts(input: PostTransactionInput): AccountRef[] {
  return [...new Map(input.legs.map((leg) => [refName(leg.account), leg.account])).values()];
}

/**
 * Locks the legs' accounts in id order, with what the lock's snapshot saw of the post's key and hold.
 * Accounts named by key that the snapshot did not show are created (first use) and then taken; an id
 * that names no account is a programming error.
 */
async function lockLegAccounts(q: Knex.Transaction, input: PostTransactionInput): Promise<LockedLegs> {
  const refs = legAccounts(input);
  const first = await lockForPost(q, refs, {
    idempotencyKey: input.idempotencyKey,
    holdKey: input.resolvesHold?.key ?? null,
  });
  learnAccountIds(first.accounts);
  const accounts = new Map<string, LedgerAccountRow>();
  for (const row of first.accounts) for (const name of accountNames(row)) accounts.set(name, row);
  const missing = refs.filter((ref) => !accounts.has(refName(ref)));
  if (missing.some((ref) => "id" in ref))
    throw new Error("a ledger leg names an account that does not exist");
  if (missing.length > 0) {
    await createAccounts(q, missing as AccountKey[]);
    // Rows this transaction just made, or that another made since the lock's snapshot. Taking them now
    // breaks id order (this post already holds the others), so they are taken without waiting: when a
    // transaction holds one, 55P03 here runs the whole transaction again (retryTransient), and its first
    // lock then sees them. Waiting instead could close a cycle, found only after deadlock_timeout (1 s):
    // that is what 20 parallel first holds of one buyer did.
    for (const row of await lockAccountRefs(q, missing, { noWait: true }))
      for (const name of accountNames(row)) accounts.set(name, row);
    if (refs.some((ref) => !accounts.has(refName(ref))))
      throw new Error("a ledger account was created but is not visible");
  }
  return { accounts, keyTakenBy: first.keyTakenBy, holdResolvedBy: first.holdResolvedBy, hold: first.hold };
}

/** True when a recorded entry is this leg: same account (by id, or by owner, kind and currency) and amount. */
function isLeg(leg: LedgerLeg, entry: LedgerEntryView): boolean {
  if (entry.amount_micros !== leg.amountMicros) return false;
  return accountNames({ ...entry, id: entry.account_id }).includes(refName(leg.account));
}

/** A key seen before returns its first transaction; the same key for different legs is a bug. */
async function replay(
  q: Knex.Transaction,
  input: Posting,
  known?: LedgerTransactionRow,
): Promise<PostResult> {
  const existing = known ?? (await findTransactionByKey(q, input.idempotencyKey));
  if (!existing)
    throw new Error(`ledger idempotency key ${input.idempotencyKey} conflicted but is not visible`);
  const unmatched = await transactionEntries(q, existing.id);
  const sameLegs =
    unmatched.length === input.legs.length &&
    input.legs.every((leg) => {
      const at = unmatched.findIndex((entry) => isLeg(leg, entry));
      if (at < 0) return false;
      unmatched.splice(at, 1);
      return true;
    });
  const same =
    existing.kind === input.kind && existing.resolves_transaction_id === input.resolves && sameLegs;
  if (!same) {
    throw new Error(
      `ledger idempotency key ${input.idempotencyKey} was already used for a different transaction (${existing.id})`,
    );
  }
  return { transactionId: existing.id, replayed: true };
}

function insufficientFunds(account: LedgerAccountRow, availableMicros: bigint, requiredMicros: bigint) {
  return new AppError("PAYMENT_REQUIRED", "insufficient funds", {
    account_kind: account.kind,
    currency: account.currency,
    available_usdc: formatUsdc(availableMicros),
    required_usdc: formatUsdc(requiredMicros),
  });
}
