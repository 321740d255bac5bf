import type { Knex } from "knex";
import { AppError } from "../errors.js";
import { formatUsdc } from "../kernel/money.js";
import {
  type AgentMovement,
  type Currency,
  captureHold,
  type EvidenceRow,
  type HeldFunds,
  type HoldOutcome,
  holdAndResolveTogether,
  holdFunds,
  type PostEvidence,
  releaseHold,
  THIS_TRANSACTION,
} from "../money/index.js";
import type { InvocationError } from "./store/invocations.js";

// The money side of a paid call (docs/payments.md "Paying for calls"): hold in the invocation's own transaction,
// capture the serving listing's price on success (97 % seller, 3 % platform), release on failure. Each
// step writes its evidence row in the same transaction as its ledger movement, so the evidence and the
// money never disagree; the rows go in with the ledger movement's own write (PostTransactionInput.evidence),
// one statement for both. Every step is keyed by the invocation id and safe to repeat. The unit is the
// invocation's currency: USDC, or tUSDC for the sandbox (docs/x402.md "Sandbox (tumbler)"), whose evidence
// sources name the tumbler rail and whose every evidence row says simulated: true.

export const holdKey = (invocationId: string) => `ledger:hold:${invocationId}`;
export const captureKey = (invocationId: string) => `ledger:capture:${invocationId}`;
export const releaseKey = (invocationId: string) => `ledger:release:${invocationId}`;

const SUBJECT = "invocation";

interface PaidInvocation {
  id: string;
  /** null for an x402 invocation: it is paid on chain by its payer, never from a ledger hold. */
  agent_id: string | null;
  /** The invocation's unit; USDC when absent. */
  currency?: Currency;
}

/** How each unit's evidence reads: ledger sources that name the rail, and whether the units are simulated. */
const RAILS = {
  USDC: { hold: "ledger_hold", capture: "ledger_capture", release: "ledger_release", simulated: false },
  tUSDC: {
    hold: "tumbler_ledger_hold",
    capture: "tumbler_ledger_capture",
    release: "tumbler_ledger_release",
    simulated: true,
  },
} as const satisfies Record<Currency, unknown>;

const railOf = (invocation: PaidInvocation) => RAILS[invocation.currency ?? "USDC"];

/** The suffix of amount fields at the API edge: amount_usdc for USDC, amount_tusdc for the sandbox. */
export const amountSuffix = (currency: Currency) => (currency === "USDC" ? "usdc" : "tusdc");

function evidence(
  invocation: PaidInvocation,
  e: Omit<PostEvidence, "agent_id" | "invocation_id" | "subject_type" | "subject_id">,
): PostEvidence {
  const simulated = railOf(invocation).simulated;
  return {
    agent_id: invocation.agent_id,
    invocation_id: invocation.id,
    subject_type: SUBJECT,
    subject_id: invocation.id,
    currency: invocation.currency ?? "USDC",
    ...e,
    details: simulated ? { ...e.details, simulated: true, rail: "tumbler" } : e.details,
  };
}

/**
 * Holds the price for a paid invocation inside the caller's transaction (the one that inserts the
 * invocation), with its authorization evidence: the key that asked and the limit it gave. Short funds
 * → 402 PAYMENT_REQUIRED saying how to fund, and the caller's transaction writes nothing. withWrite:
 * the caller's statements sent with the hold's write, after its accounts are locked and never after a
 * refusal (PostTransactionInput.withWrite). before: the caller's statements sent just before (the
 * invocation's insert among them), whose flight the hold's lock joins (PostTransactionInput.before).
 * last: the hold's write is the last statement of the caller's transaction, whose COMMIT then goes with
 * it (PostTransactionInput.commitWithWrite). oneFlight: with last, the hold's lock and write go out with
 * `before` without waiting for its answers, every statement of which refuses by failing
 * (PostTransactionInput.oneFlight).
 */
export async function holdForInvocation(
  trx: Knex.Transaction,
  invocation: PaidInvocation & { api_key_id: string | null },
  holdMicros: bigint,
  terms: HoldTerms,
  sent: {
    before?: Promise<unknown>;
    withWrite?: () => Promise<unknown>;
    last?: boolean;
    oneFlight?: boolean;
  } = {},
): Promise<void> {
  const movement = holdMovement({ invocation, holdMicros, terms, withWrite: sent.withWrite });
  try {
    await holdFunds(
      {
        ...movement,
        before: sent.before,
        commitWithWrite: sent.last,
        oneFlight: sent.oneFlight,
      },
      trx,
    );
  } catch (error) {
    if (error instanceof AppError && error.code === "PAYMENT_REQUIRED")
      throw movement.currency === "USDC"
        ? fundingNeeded(error, holdMicros)
        : sandboxFundingNeeded(error, holdMicros);
    throw error;
  }
}

/** What a paid invocation's hold is for: the price listed, the buyer's max_cost, the route, the quote paid. */
export interface HoldTerms {
  listedPriceMicros: bigint;
  maxCostMicros: bigint | null;
  route: string;
  quoteId?: string;
}

/** A paid invocation's hold: its invocation, amount and terms, and the caller's statements sent with its write. */
export interface InvocationHold {
  invocation: PaidInvocation & { api_key_id: string | null };
  holdMicros: bigint;
  terms: HoldTerms;
  withWrite?: () => Promise<unknown>;
}

/**
 * Holds for paid invocations in the transaction that inserts them, and the settlements of successes in
 * the transaction that records them (one transaction, when a paid group carries both: paid-group.ts), in
 * one flight that ends it, all or nothing (holdAndResolveTogether), behind `before` (the inserts and
 * records), with the group's withWrites after every write. Each success's own before, last and oneFlight
 * are the group's here. On any failure, short funds included, nothing is written and the error is thrown
 * as it is: the caller then holds for each invocation alone (holdForInvocation) and settles each success
 * alone (settleSuccess), which answers it.
 */
export async function holdAndSettleTogether(
  trx: Knex.Transaction,
  holds: readonly InvocationHold[],
  successes: readonly PaidSuccess[],
  before: Promise<unknown>,
  withWrites?: () => Promise<unknown>,
): Promise<void> {
  await holdAndResolveTogether(
    holds.map(holdMovement),
    successes.map(successOutcome),
    trx,
    before,
    withWrites,
  );
}

/** A paid invocation's hold as a ledger movement, with its authorization evidence: the key that asked and the limit it gave. */
function holdMovement(h: InvocationHold): AgentMovement {
  const { invocation, holdMicros, terms } = h;
  const agentId = invocation.agent_id;
  if (!agentId) throw new Error(`invocation ${invocation.id} has no agent to hold funds from`);
  const authorization = evidence(invocation, {
    state: "authorization",
    source: railOf(invocation).hold,
    source_ref: THIS_TRANSACTION,
    amount_micros: holdMicros,
    details: {
      api_key_id: invocation.api_key_id,
      route: terms.route,
      listed_price_micros: terms.listedPriceMicros.toString(),
      max_cost_micros: terms.maxCostMicros?.toString() ?? null,
      ...(terms.quoteId ? { quote_id: terms.quoteId } : {}),
    },
  });
  return {
    agentId,
    currency: invocation.currency ?? "USDC",
    amountMicros: holdMicros,
    reference: { type: SUBJECT, id: invocation.id },
    idempotencyKey: holdKey(invocation.id),
    metadata: { route: terms.route },
    evidence: [authorization],
    withWrite: h.withWrite,
  };
}

function fundingNeeded(error: AppError, holdMicros: bigint): AppError {
  return new AppError("PAYMENT_REQUIRED", "your available USDC balance does not cover this call", {
    ...error.details,
    required_usdc: formatUsdc(holdMicros),
    what_to_do: [
      "GET /api/wallet to see available and held funds",
      "POST /api/wallet/purchase for deposit instructions, then POST /api/wallet/purchase/verify {tx_hash}",
      "or call a free listing (task 'echo') or GET /api/execute/match with a lower max_cost",
    ],
  });
}

/** Short of tUSDC in the sandbox: the faucet, not a deposit, is the way to top up. */
function sandboxFundingNeeded(error: AppError, holdMicros: bigint): AppError {
  const details = error.details ?? {};
  return new AppError(
    "PAYMENT_REQUIRED",
    "your available tUSDC (simulated sandbox units) does not cover this call",
    {
      account_kind: details.account_kind,
      currency: "tUSDC",
      simulated: true,
      available_tusdc: details.available_usdc,
      required_tusdc: formatUsdc(holdMicros),
      what_to_do: [
        "POST /api/tumbler/join: the faucet tops your available tUSDC up once per UTC day",
        "GET /api/wallet to see your tUSDC balance",
        "or GET /api/tumbler/execute/match for a cheaper sandbox listing",
      ],
    },
  );
}

/**
 * What a successful call charges: a quoted invocation (the sandbox, x402, or keyed work paying a ledger
 * quote) charges its quoted amount, the price the buyer accepted; other router and direct-invoke work
 * charges the serving listing's price.
 */
export function chargeMicros(
  invocation: { route: string; price_micros: string; quote_id?: string | null },
  servingPriceMicros: bigint,
) {
  return invocation.route === "tumbler" || invocation.route === "x402" || invocation.quote_id
    ? BigInt(invocation.price_micros)
    : servingPriceMicros;
}

/**
 * What the invocation's hold holds, by the invocation's own row: its buyer's funds, in its unit, its
 * hold_micros, for it. A capture or release given this does not read the hold first: its lock checks it
 * (HoldResolution.expected). Only a buyer's funds are held: an invocation with none (x402, paid on chain)
 * holds nothing, so asking for its hold is a programming error.
 */
function expectedHold(invocation: PaidInvocation, holdMicros: bigint): HeldFunds {
  if (!invocation.agent_id)
    throw new Error(`invocation ${invocation.id} has no buyer, so no ledger hold to resolve`);
  return {
    agentId: invocation.agent_id,
    currency: invocation.currency ?? "USDC",
    amountMicros: holdMicros,
    reference: { type: SUBJECT, id: invocation.id },
  };
}

export interface PaidSuccess {
  invocation: PaidInvocation;
  /**
   * The caller's statements sent just before (its success record): the capture's lock goes out in their
   * flight, and the capture goes on only once they have succeeded (HoldResolution.before).
   */
  before?: Promise<unknown>;
  /** The caller's statements sent with the capture's or release's write (PostTransactionInput.withWrite). */
  withWrite?: () => Promise<unknown>;
  /**
   * The capture's or release's write is the last statement of the caller's transaction: its COMMIT goes
   * with it (PostTransactionInput.commitWithWrite).
   */
  last?: boolean;
  /**
   * With last: the capture's or release's lock and write go out with `before`, without waiting for its
   * answer (PostTransactionInput.oneFlight). Only when every statement of `before` and withWrite refuses
   * by failing.
   */
  oneFlight?: boolean;
  attemptId: string;
  receiptId: string;
  /** The listing that served, its seller (null = first party) and its price: what is charged. */
  listingId: string;
  sellerAgentId: string | null;
  priceMicros: bigint;
  holdMicros: bigint;
  providerEvidence: Record<string, unknown>;
}

/**
 * On success, in the transaction that records it: the capture of the serving listing's price (the rest
 * of the hold, if the hold was for a dearer candidate, goes back to the buyer), or a release when the
 * serving listing was free; with it, in its write, the execution, capture or refund, and outcome
 * evidence.
 */
export async function settleSuccess(trx: Knex.Transaction, s: PaidSuccess): Promise<void> {
  const outcome = successOutcome(s);
  if ("capture" in outcome) await captureHold(outcome.capture, trx);
  else await releaseHold(outcome.release, trx);
}

/** A success's capture, or its release when the serving listing was free, with their evidence. */
function successOutcome(s: PaidSuccess): HoldOutcome {
  const execution = evidence(s.invocation, {
    state: "execution",
    source: "provider_response",
    source_ref: s.attemptId,
    amount_micros: null,
    details: { listing_id: s.listingId, ...s.providerEvidence },
  });
  const outcome = evidence(s.invocation, {
    state: "outcome",
    source: "invocation",
    source_ref: s.invocation.id,
    amount_micros: s.priceMicros,
    details: { status: "succeeded", receipt_id: s.receiptId },
  });
  const resolution = {
    holdKey: holdKey(s.invocation.id),
    expected: expectedHold(s.invocation, s.holdMicros),
    before: s.before,
    withWrite: s.withWrite,
    commitWithWrite: s.last,
    oneFlight: s.oneFlight,
  };
  if (s.priceMicros > 0n) {
    return {
      capture: {
        ...resolution,
        idempotencyKey: captureKey(s.invocation.id),
        sellerAgentId: s.sellerAgentId,
        captureMicros: s.priceMicros,
        metadata: { receipt_id: s.receiptId, listing_id: s.listingId },
        evidence: (split) => [
          execution,
          evidence(s.invocation, {
            state: "capture",
            source: railOf(s.invocation).capture,
            source_ref: THIS_TRANSACTION,
            amount_micros: split.capturedMicros,
            details: {
              receipt_id: s.receiptId,
              listing_id: s.listingId,
              seller_agent_id: s.sellerAgentId,
              seller_micros: split.sellerMicros.toString(),
              platform_fee_micros: split.feeMicros.toString(),
              returned_to_buyer_micros: split.returnedMicros.toString(),
            },
          }),
          outcome,
        ],
      },
    };
  }
  const refund = evidence(s.invocation, {
    state: "refund",
    source: railOf(s.invocation).release,
    source_ref: THIS_TRANSACTION,
    amount_micros: s.holdMicros,
    details: { reason: "served_by_free_listing" },
  });
  return {
    release: {
      ...resolution,
      idempotencyKey: releaseKey(s.invocation.id),
      metadata: { reason: "served_by_free_listing" },
      evidence: [execution, refund, outcome],
    },
  };
}

/**
 * On failure, in the transaction that records it: the whole hold goes back, with refund evidence;
 * withWrite and last as for holdForInvocation.
 */
export async function releaseForFailure(
  trx: Knex.Transaction,
  invocation: PaidInvocation,
  holdMicros: bigint,
  error: InvocationError,
  sent: { withWrite?: () => Promise<unknown>; last?: boolean } = {},
): Promise<void> {
  await releaseHold(
    {
      holdKey: holdKey(invocation.id),
      expected: expectedHold(invocation, holdMicros),
      withWrite: sent.withWrite,
      commitWithWrite: sent.last,
      idempotencyKey: releaseKey(invocation.id),
      metadata: { reason: error.code },
      evidence: [
        evidence(invocation, {
          state: "refund",
          source: railOf(invocation).release,
          source_ref: THIS_TRANSACTION,
          amount_micros: holdMicros,
          details: { reason: error.code, message: error.message },
        }),
        evidence(invocation, {
          state: "outcome",
          source: "invocation",
          source_ref: invocation.id,
          amount_micros: 0n,
          details: { status: "failed", error_code: error.code },
        }),
      ],
    },
    trx,
  );
}

/** The split a capture recorded (seller share and platform fee, in micros), or null when nothing was captured. */
export function capturedSplit(rows: EvidenceRow[]): { sellerMicros: bigint; feeMicros: bigint } | null {
  const capture = rows.find((r) => r.state === "capture");
  if (!capture) return null;
  const details = capture.details as Record<string, string | undefined>;
  return {
    sellerMicros: BigInt(details.seller_micros ?? "0"),
    feeMicros: BigInt(details.platform_fee_micros ?? "0"),
  };
}

/**
 * The payment block of a status or receipt: amounts from evidence only, null + reason for the rest.
 * Amount fields carry the unit in their names (held_usdc, or held_tusdc for the sandbox), so simulated
 * units can never be read as USDC.
 */
export function paymentView(
  holdMicros: bigint,
  listedPriceMicros: bigint,
  rows: EvidenceRow[],
  currency: Currency = "USDC",
): Record<string, unknown> {
  const unit = amountSuffix(currency);
  const sandbox = currency === "tUSDC" ? { simulated: true as const } : {};
  const of = (state: EvidenceRow["state"]) => rows.find((r) => r.state === state);
  const amount = (row: EvidenceRow | undefined) => (row?.amount_micros ? BigInt(row.amount_micros) : 0n);
  const state = (name: EvidenceRow["state"], nullReason: string) => {
    const row = of(name);
    return row
      ? {
          [name]: {
            at: row.created_at.toISOString(),
            source: row.source,
            source_ref: row.source_ref,
            [`amount_${unit}`]: row.amount_micros === null ? null : formatUsdc(BigInt(row.amount_micros)),
            details: row.details,
          },
          [`${name}_null_reason`]: null,
        }
      : { [name]: null, [`${name}_null_reason`]: nullReason };
  };
  if (holdMicros === 0n) {
    return {
      requires_payment: false,
      currency,
      ...sandbox,
      [`listed_price_${unit}`]: formatUsdc(listedPriceMicros),
      null_reason: "free_invocation_no_payment",
    };
  }
  const capture = of("capture");
  const refund = of("refund");
  const split = capturedSplit(rows);
  const details = (capture?.details ?? {}) as Record<string, string | undefined>;
  return {
    requires_payment: true,
    currency,
    ...sandbox,
    [`listed_price_${unit}`]: formatUsdc(listedPriceMicros),
    [`held_${unit}`]: formatUsdc(holdMicros),
    [`charged_${unit}`]: formatUsdc(amount(capture)),
    [`seller_share_${unit}`]: split ? formatUsdc(split.sellerMicros) : null,
    [`platform_fee_${unit}`]: split ? formatUsdc(split.feeMicros) : null,
    [`refunded_${unit}`]: refund
      ? formatUsdc(amount(refund))
      : capture
        ? formatUsdc(BigInt(details.returned_to_buyer_micros ?? "0"))
        : null,
    state: capture ? "captured" : refund ? "released" : of("authorization") ? "held" : null,
    evidence: {
      ...state("authorization", "no_hold_recorded"),
      ...state("execution", "no_successful_provider_response"),
      ...state("capture", refund ? "released_not_captured" : "not_captured_yet"),
      ...state("refund", capture ? "captured_not_refunded" : "not_released_yet"),
      ...state("outcome", "invocation_not_finished"),
    },
    onchain_settlement: null,
    onchain_settlement_null_reason:
      currency === "USDC"
        ? "prepaid_balance_call_settles_in_the_ledger_deposits_settled_on_chain"
        : "sandbox_units_are_simulated_and_never_settle_on_chain",
  };
}
