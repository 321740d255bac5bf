import type { Knex } from "knex";
import { db } from "../db/knex.js";
import { UTC_TODAY } from "../db/prepared.js";
import { refusedAs } from "../db/refusals.js";
import { AppError } from "../errors.js";
import { daysAfter } from "../kernel/days.js";
import { formatUsdc, micros } from "../kernel/money.js";
import type { KeyPolicy } from "./key-policy.js";
import {
  DAILY_CAP_FULL,
  readSpendToday,
  reserveSpend,
  reserveSpendTogether,
  resolveReservation,
  resolveReservations,
} from "./store/spend-days.js";

// A key's spend limits (docs/payments.md "Keys, scopes and spend limits"): a per-call limit and a daily cap per
// UTC day, both on what a paid call holds. Free work is never limited by price. The daily reservation is
// taken in the transaction that takes the ledger hold and is resolved in the transaction that captures
// or releases it: a capture counts what it charged as spent, a release gives the whole reservation back.

/** Midnight UTC after the given day (YYYY-MM-DD): when that day's cap resets. */
export function utcDayEnd(day: string): string {
  return daysAfter(new Date(`${day}T00:00:00.000Z`), 1).toISOString();
}

/** True when a paid hold of this size is within the key's per-call limit. */
export function withinPerCallLimit(policy: KeyPolicy, holdMicros: bigint): boolean {
  return policy.perCallLimitMicros === null || holdMicros <= policy.perCallLimitMicros;
}

/** 429 WALLET_LIMIT_EXCEEDED when one call would hold more than the key's per-call limit. */
export function assertPerCallLimit(policy: KeyPolicy, holdMicros: bigint): void {
  if (withinPerCallLimit(policy, holdMicros)) return;
  throw new AppError("WALLET_LIMIT_EXCEEDED", "this call would cost more than the API key's per-call limit", {
    limit: "per_call",
    limit_usdc: formatUsdc(policy.perCallLimitMicros!),
    requested_usdc: formatUsdc(holdMicros),
    hint: "call with a max_cost at or below the limit, or use a key with a higher per-call limit",
  });
}

function dailyCapExceeded(
  capMicros: bigint,
  requestedMicros: bigint,
  today: { day: string; reserved_micros: string; spent_micros: string },
): AppError {
  const reserved = micros(today.reserved_micros);
  const spent = micros(today.spent_micros);
  const remaining = capMicros - reserved - spent;
  return new AppError("WALLET_LIMIT_EXCEEDED", "this call would take the API key past its daily cap", {
    limit: "daily_cap",
    limit_usdc: formatUsdc(capMicros),
    requested_usdc: formatUsdc(requestedMicros),
    spent_usdc: formatUsdc(spent),
    reserved_usdc: formatUsdc(reserved),
    remaining_usdc: formatUsdc(remaining > 0n ? remaining : 0n),
    day: today.day,
    resets_at: utcDayEnd(today.day),
    hint: "wait for resets_at, call a cheaper listing, or use a key with a higher daily cap",
  });
}

/**
 * Before any charge: 429 WALLET_LIMIT_EXCEEDED when a paid call would hold more than the key's per-call
 * limit, or more than its whole daily cap (refused without touching the day's row). Whether the cap
 * still has room is decided atomically by reserveDailySpend, in the hold's transaction.
 */
export async function assertWithinSpendLimits(
  key: { apiKeyId: string; policy: KeyPolicy },
  holdMicros: bigint,
): Promise<void> {
  if (holdMicros === 0n) return;
  assertPerCallLimit(key.policy, holdMicros);
  const cap = key.policy.dailyCapMicros;
  if (cap !== null && holdMicros > cap)
    throw dailyCapExceeded(cap, holdMicros, await readSpendToday(db(), key.apiKeyId));
}

/**
 * A key's daily cap had no room for a paid call's reservation: the reservation's statement failed, and its
 * transaction rolled back. dailyCapRefusal answers the 429 once it has.
 */
export class DailyCapFull extends Error {
  constructor(
    readonly key: { apiKeyId: string; policy: KeyPolicy },
    readonly holdMicros: bigint,
  ) {
    super("the key's daily cap has no room for this call");
    this.name = "DailyCapFull";
  }
}

/**
 * What a reserving invocation's spend_day is inserted as: the database's UTC day of the transaction that
 * reserves (reserveDailySpend), the day resolveReservation later settles or returns the hold on. Given to
 * the invocation's insert in the reserving transaction, never apart from it.
 */
export const SPEND_DAY_STAMP: typeof UTC_TODAY = UTC_TODAY;

/**
 * Reserves a paid call's hold against the key's day, inside the transaction that takes the hold. Over the
 * cap, the statement fails (DailyCapFull) rather than answering so: the hold and its COMMIT may be sent
 * behind it without waiting for its answer (PostTransactionInput.oneFlight), and nothing is written.
 * Keys without a cap reserve too, so every key shows what it reserved and spent today. The invocation's
 * insert, in the same transaction, stamps it with the day (SPEND_DAY_STAMP).
 */
export async function reserveDailySpend(
  trx: Knex.Transaction,
  key: { apiKeyId: string; policy: KeyPolicy },
  holdMicros: bigint,
): Promise<string> {
  return reserveSpend(trx, {
    apiKeyId: key.apiKeyId,
    amountMicros: holdMicros,
    capMicros: key.policy.dailyCapMicros,
  }).catch(refusedAs(DAILY_CAP_FULL, () => new DailyCapFull(key, holdMicros)));
}

/**
 * reserveDailySpend for a paid group's holds, in one statement (reserveSpendTogether): all or nothing.
 * A key whose cap has no room for its sum fails the statement, and the caller's transaction rolls back;
 * its caller then reserves each alone (reserveDailySpend), which tells which one found no room.
 */
export async function reserveDailySpendTogether(
  trx: Knex.Transaction,
  reservations: readonly { key: { apiKeyId: string; policy: KeyPolicy }; holdMicros: bigint }[],
): Promise<void> {
  await reserveSpendTogether(
    trx,
    reservations.map((r) => ({
      apiKeyId: r.key.apiKeyId,
      amountMicros: r.holdMicros,
      capMicros: r.key.policy.dailyCapMicros,
    })),
  );
}

/**
 * The 429 WALLET_LIMIT_EXCEEDED for a reservation that found no room (limit, spent, reserved,
 * resets_at), the day read as it stands: once the refused transaction has rolled back.
 */
export async function dailyCapRefusal(refused: DailyCapFull): Promise<AppError> {
  const cap = refused.key.policy.dailyCapMicros!;
  return dailyCapExceeded(cap, refused.holdMicros, await readSpendToday(db(), refused.key.apiKeyId));
}

/** A released hold (failure, denial, expiry) gives its whole reservation back to the day it was made. */
export async function returnDailySpend(trx: Knex.Transaction, invocationId: string): Promise<void> {
  await resolveReservation(trx, invocationId, 0n);
}

/** settleDailySpend for a paid group's captures, in one statement (resolveReservations). */
export async function settleDailySpendTogether(
  trx: Knex.Transaction,
  captures: readonly { invocationId: string; capturedMicros: bigint }[],
): Promise<void> {
  await resolveReservations(trx, captures);
}

/** A capture turns the reservation into spend: what was captured counts, the rest of the hold returns. */
export async function settleDailySpend(
  trx: Knex.Transaction,
  invocationId: string,
  capturedMicros: bigint,
): Promise<void> {
  await resolveReservation(trx, invocationId, capturedMicros);
}
