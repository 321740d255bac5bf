import type { Knex } from "knex";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { formatUsdc } from "../../kernel/money.js";
import {
  type AgentAccountKind,
  agentAccounts,
  applyEntries,
  type Currency,
  findTransactionByKey,
  getOrCreateAccount,
  insertTransaction,
  type LedgerAccountRow,
  lockAccounts,
  type NewEntry,
  type PlatformAccountKind,
  type TransactionKind,
  transactionEntries,
} from "./store.js";

export type { AgentAccountKind, Currency, LedgerAccountRow, PlatformAccountKind, TransactionKind };

/** The platform's share of a captured payment, in percent (the seller gets the rest). */
export const PLATFORM_FEE_PERCENT = 3n;

/** What a transaction is about, e.g. { type: "invocation", id }. */
export interface LedgerReference {
  type: string;
  id: string;
}

/** One signed amount on one account: negative debits it, positive credits it. */
export interface LedgerLeg {
  account: Pick<LedgerAccountRow, "id">;
  amountMicros: bigint;
}

export interface PostTransactionInput {
  kind: TransactionKind;
  /** The same key posts once: a second post returns the first transaction (replayed: true). */
  idempotencyKey: string;
  reference?: LedgerReference | null;
  legs: LedgerLeg[];
  metadata?: Record<string, unknown>;
  /** For a capture or release: the hold it resolves. A hold is resolved once, either way. */
  resolves?: string | null;
}

export interface PostResult {
  transactionId: string;
  replayed: boolean;
}

/** A capture or release named a hold that a different transaction already captured or released. */
export class HoldAlreadyResolvedError extends Error {
  constructor(readonly holdTransactionId: string) {
    super(`ledger hold ${holdTransactionId} is already captured or released`);
    this.name = "HoldAlreadyResolvedError";
  }
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

const RETRYABLE_CODES = new Set(["40001", "40P01"]);
const MAX_ATTEMPTS = 5;

/** True for PostgreSQL serialization failures (40001) and deadlocks (40P01): safe to run again. */
export function isRetryableDbError(error: unknown): boolean {
  return RETRYABLE_CODES.has((error as { code?: unknown } | null)?.code as string);
}

/** Runs a whole transaction again on 40001/40P01, up to 5 attempts, with jittered exponential pauses. */
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
 * joins it (inside a savepoint, so a refusal leaves the caller's work intact) and never retries: the
 * caller owns the retry. Alone it runs its own transaction and retries it on 40001/40P01.
 */
export async function postTransaction(
  input: PostTransactionInput,
  trx?: Knex.Transaction,
): Promise<PostResult> {
  checkLegs(input);
  try {
    if (trx) return await trx.transaction((savepoint) => post(savepoint, input));
    return await retryTransient(() => db().transaction((own) => post(own, input)));
  } catch (error) {
    if (!(error instanceof HoldAlreadyResolvedError)) throw error;
    // Two posts of one key that resolve one hold, at once: both pass the key check before either has
    // inserted, and the loser can meet the resolves-once index before the key's. Then the hold was
    // resolved by this very key, so the answer is the replay. Once the winner has committed (the loser
    // waited for it), its key is visible: READ COMMITTED reads it afresh.
    if (!(await findTransactionByKey(trx ?? db(), input.idempotencyKey))) throw error;
    if (trx) return trx.transaction((savepoint) => replay(savepoint, input));
    return db().transaction((own) => replay(own, input));
  }
}

async function post(q: Knex.Transaction, input: PostTransactionInput): Promise<PostResult> {
  const row = await insertTransaction(q, {
    kind: input.kind,
    idempotency_key: input.idempotencyKey,
    reference_type: input.reference?.type ?? null,
    reference_id: input.reference?.id ?? null,
    resolves_transaction_id: input.resolves ?? null,
    metadata: input.metadata ?? {},
  }).catch((error: unknown) => {
    const pg = error as { code?: string; constraint?: string };
    if (pg.code === "23505" && pg.constraint === "ledger_transactions_resolves_once" && input.resolves) {
      throw new HoldAlreadyResolvedError(input.resolves);
    }
    throw error;
  });
  if (!row) return replay(q, input);

  const ids = [...new Set(input.legs.map((leg) => leg.account.id))];
  const accounts = new Map((await lockAccounts(q, ids)).map((a) => [a.id, a]));
  if (accounts.size !== ids.length) throw new Error("a ledger leg names an account that does not exist");
  const currencies = new Set([...accounts.values()].map((a) => a.currency));
  if (currencies.size !== 1) {
    throw new Error(`a ledger transaction cannot mix currencies (${[...currencies].join(", ")})`);
  }

  const running = new Map([...accounts.values()].map((a) => [a.id, a.balance_micros]));
  const entries: NewEntry[] = input.legs.map((leg) => {
    const account = accounts.get(leg.account.id)!;
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
  await applyEntries(q, row.id, entries);
  return { transactionId: row.id, replayed: false };
}

/** A key seen before returns its first transaction; the same key for different legs is a bug. */
async function replay(q: Knex.Transaction, input: PostTransactionInput): Promise<PostResult> {
  const existing = await findTransactionByKey(q, input.idempotencyKey);
  if (!existing)
    throw new Error(`ledger idempotency key ${input.idempotencyKey} conflicted but is not visible`);
  const recorded = (await transactionEntries(q, existing.id))
    .map((e) => `${e.account_id}:${e.amount_micros}`)
    .sort();
  const asked = input.legs.map((leg) => `${leg.account.id}:${leg.amountMicros}`).sort();
  const same =
    existing.kind === input.kind &&
    existing.resolves_transaction_id === (input.resolves ?? null) &&
    recorded.join() === asked.join();
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
