import type { Knex } from "knex";
import { appendEvidence, type EvidenceRow, type NewEvidence } from "../db/evidence.js";
import type { InvocationError } from "../db/invocations.js";
import { AppError } from "../errors.js";
import { type CaptureResult, captureHold, holdFunds, releaseHold } from "./ledger-flows.js";
import { formatUsdc } from "./money.js";

// The money side of a paid router call (README "Paying for calls"): hold in the invocation's own
// transaction, capture the serving listing's price on success (97 % seller, 3 % platform), release on
// failure. Each step writes its evidence row in the same transaction as its ledger movement, so the
// evidence and the money never disagree. Every step is keyed by the invocation id and safe to repeat.

export const holdKey = (invocationId: string) => `ledger:hold:${invocationId}`;
export const captureKey = (invocationId: string) => `ledger:capture:${invocationId}`;
export const releaseKey = (invocationId: string) => `ledger:release:${invocationId}`;

const SUBJECT = "invocation";

interface PaidInvocation {
  id: string;
  agent_id: string;
}

function evidence(
  invocation: PaidInvocation,
  e: Omit<NewEvidence, "agent_id" | "invocation_id" | "subject_type" | "subject_id">,
): NewEvidence {
  return {
    agent_id: invocation.agent_id,
    invocation_id: invocation.id,
    subject_type: SUBJECT,
    subject_id: invocation.id,
    currency: "USDC",
    ...e,
  };
}

/**
 * Holds the price for a paid invocation inside the caller's transaction (the one that inserts the
 * invocation), with its authorization evidence: the key that asked and the limit it gave. Short funds
 * → 402 PAYMENT_REQUIRED saying how to fund, and the caller's transaction writes nothing.
 */
export async function holdForInvocation(
  trx: Knex.Transaction,
  invocation: PaidInvocation & { api_key_id: string },
  holdMicros: bigint,
  terms: { listedPriceMicros: bigint; maxCostMicros: bigint | null; route: string },
): Promise<void> {
  let posted: Awaited<ReturnType<typeof holdFunds>>;
  try {
    posted = await holdFunds(
      {
        agentId: invocation.agent_id,
        currency: "USDC",
        amountMicros: holdMicros,
        reference: { type: SUBJECT, id: invocation.id },
        idempotencyKey: holdKey(invocation.id),
        metadata: { route: terms.route },
      },
      trx,
    );
  } catch (error) {
    if (error instanceof AppError && error.code === "PAYMENT_REQUIRED")
      throw fundingNeeded(error, holdMicros);
    throw error;
  }
  await appendEvidence(
    trx,
    evidence(invocation, {
      state: "authorization",
      source: "ledger_hold",
      source_ref: posted.transactionId,
      amount_micros: holdMicros,
      details: {
        api_key_id: invocation.api_key_id,
        route: terms.route,
        listed_price_micros: terms.listedPriceMicros.toString(),
        max_cost_micros: terms.maxCostMicros?.toString() ?? null,
      },
    }),
  );
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

export interface PaidSuccess {
  invocation: PaidInvocation;
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
 * On success, in the transaction that records it: execution evidence, then the capture of the serving
 * listing's price (the rest of the hold, if the hold was for a dearer candidate, goes back to the
 * buyer), or a release when the serving listing was free; then the outcome.
 */
export async function settleSuccess(trx: Knex.Transaction, s: PaidSuccess): Promise<void> {
  const rows: NewEvidence[] = [
    evidence(s.invocation, {
      state: "execution",
      source: "provider_response",
      source_ref: s.attemptId,
      amount_micros: null,
      details: { listing_id: s.listingId, ...s.providerEvidence },
    }),
  ];
  if (s.priceMicros > 0n) {
    const capture: CaptureResult & { capturedMicros: bigint; returnedMicros: bigint } = await captureHold(
      {
        holdKey: holdKey(s.invocation.id),
        idempotencyKey: captureKey(s.invocation.id),
        sellerAgentId: s.sellerAgentId,
        captureMicros: s.priceMicros,
        metadata: { receipt_id: s.receiptId, listing_id: s.listingId },
      },
      trx,
    );
    rows.push(
      evidence(s.invocation, {
        state: "capture",
        source: "ledger_capture",
        source_ref: capture.transactionId,
        amount_micros: capture.capturedMicros,
        details: {
          receipt_id: s.receiptId,
          listing_id: s.listingId,
          seller_agent_id: s.sellerAgentId,
          seller_micros: capture.sellerMicros.toString(),
          platform_fee_micros: capture.feeMicros.toString(),
          returned_to_buyer_micros: capture.returnedMicros.toString(),
        },
      }),
    );
  } else {
    const released = await releaseHold(
      {
        holdKey: holdKey(s.invocation.id),
        idempotencyKey: releaseKey(s.invocation.id),
        metadata: { reason: "served_by_free_listing" },
      },
      trx,
    );
    rows.push(
      evidence(s.invocation, {
        state: "refund",
        source: "ledger_release",
        source_ref: released.transactionId,
        amount_micros: s.holdMicros,
        details: { reason: "served_by_free_listing" },
      }),
    );
  }
  rows.push(
    evidence(s.invocation, {
      state: "outcome",
      source: "invocation",
      source_ref: s.invocation.id,
      amount_micros: s.priceMicros,
      details: { status: "succeeded", receipt_id: s.receiptId },
    }),
  );
  await appendEvidence(trx, rows);
}

/** On failure, in the transaction that records it: the whole hold goes back, with refund evidence. */
export async function releaseForFailure(
  trx: Knex.Transaction,
  invocation: PaidInvocation,
  holdMicros: bigint,
  error: InvocationError,
): Promise<void> {
  const released = await releaseHold(
    {
      holdKey: holdKey(invocation.id),
      idempotencyKey: releaseKey(invocation.id),
      metadata: { reason: error.code },
    },
    trx,
  );
  await appendEvidence(trx, [
    evidence(invocation, {
      state: "refund",
      source: "ledger_release",
      source_ref: released.transactionId,
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
  ]);
}

/** The payment block of a status or receipt: amounts from evidence only, null + reason for the rest. */
export function paymentView(holdMicros: bigint, listedPriceMicros: bigint, rows: EvidenceRow[]) {
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
            amount_usdc: row.amount_micros === null ? null : formatUsdc(BigInt(row.amount_micros)),
            details: row.details,
          },
          [`${name}_null_reason`]: null,
        }
      : { [name]: null, [`${name}_null_reason`]: nullReason };
  };
  if (holdMicros === 0n) {
    return {
      requires_payment: false,
      currency: "USDC",
      listed_price_usdc: formatUsdc(listedPriceMicros),
      null_reason: "free_invocation_no_payment",
    };
  }
  const capture = of("capture");
  const refund = of("refund");
  const captured = amount(capture);
  const details = (capture?.details ?? {}) as Record<string, string | undefined>;
  return {
    requires_payment: true,
    currency: "USDC",
    listed_price_usdc: formatUsdc(listedPriceMicros),
    held_usdc: formatUsdc(holdMicros),
    charged_usdc: formatUsdc(captured),
    seller_share_usdc: capture ? formatUsdc(BigInt(details.seller_micros ?? "0")) : null,
    platform_fee_usdc: capture ? formatUsdc(BigInt(details.platform_fee_micros ?? "0")) : null,
    refunded_usdc: refund
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
    onchain_settlement_null_reason: "prepaid_balance_call_settles_in_the_ledger_deposits_settled_on_chain",
  };
}
