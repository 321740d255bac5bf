import type { Knex } from "knex";
import { AppError } from "../errors.js";
import { formatUsdc } from "../kernel/money.js";
import { appendEvidence, captureHold, holdFunds, type NewEvidence, releaseHold } from "../money/index.js";
import type { OrderRow } from "./store/orders.js";

// The money of a verification order (docs/verification.md "Money"). The platform is the seller: the hold
// is captured with no seller agent, so the whole price goes to platform_revenue (the ledger still shows
// the 97/3 split as two revenue legs). Hold in the order's own transaction; capture when the probe ran,
// whatever the verdict; release when it could not run through our fault. Every step is keyed by the
// order id (one key per order, and a monitoring run is its own order), so a redelivered job never
// charges twice, and each writes its evidence row in the same transaction as its ledger movement.

export const orderHoldKey = (orderId: string) => `verification:hold:${orderId}`;
const captureKey = (orderId: string) => `verification:capture:${orderId}`;
const releaseKey = (orderId: string) => `verification:release:${orderId}`;

const SUBJECT = "verification_order";

function evidence(
  order: Pick<OrderRow, "id" | "buyer_agent_id">,
  e: Omit<NewEvidence, "agent_id" | "invocation_id" | "subject_type" | "subject_id" | "currency">,
): NewEvidence {
  return {
    agent_id: order.buyer_agent_id,
    invocation_id: null,
    subject_type: SUBJECT,
    subject_id: order.id,
    currency: "USDC",
    ...e,
  };
}

/** Holds the price in the caller's transaction; short funds → 402 saying how to fund, nothing written. */
export async function holdForOrder(
  trx: Knex.Transaction,
  order: Pick<OrderRow, "id" | "buyer_agent_id" | "api_key_id" | "protocol">,
  priceMicros: bigint,
  route: string,
): Promise<void> {
  let posted: Awaited<ReturnType<typeof holdFunds>>;
  try {
    posted = await holdFunds(
      {
        agentId: order.buyer_agent_id,
        currency: "USDC",
        amountMicros: priceMicros,
        reference: { type: SUBJECT, id: order.id },
        idempotencyKey: orderHoldKey(order.id),
        metadata: { route, protocol: order.protocol },
      },
      trx,
    );
  } catch (error) {
    if (error instanceof AppError && error.code === "PAYMENT_REQUIRED")
      throw fundingNeeded(error, priceMicros);
    throw error;
  }
  await appendEvidence(
    trx,
    evidence(order, {
      state: "authorization",
      source: "ledger_hold",
      source_ref: posted.transactionId,
      amount_micros: priceMicros,
      details: { api_key_id: order.api_key_id, route, listed_price_micros: priceMicros.toString() },
    }),
  );
}

function fundingNeeded(error: AppError, priceMicros: bigint): AppError {
  return new AppError("PAYMENT_REQUIRED", "your available USDC balance does not cover this verification", {
    ...error.details,
    required_usdc: formatUsdc(priceMicros),
    what_to_do: [
      "GET /api/wallet to see available and held funds",
      "POST /api/wallet/purchase for deposit instructions, then POST /api/wallet/purchase/verify {tx_hash}",
      "then repeat this request with the same Idempotency-Key",
    ],
  });
}

/** The probe ran: execution evidence, the capture (all to platform revenue), the outcome. */
export async function captureForOrder(
  trx: Knex.Transaction,
  order: OrderRow,
  attestationId: string,
  verdict: string,
): Promise<void> {
  const capture = await captureHold(
    {
      holdKey: orderHoldKey(order.id),
      idempotencyKey: captureKey(order.id),
      sellerAgentId: null,
      metadata: { verification_order_id: order.id, attestation_id: attestationId },
    },
    trx,
  );
  await appendEvidence(trx, [
    evidence(order, {
      state: "execution",
      source: "verification_probe",
      source_ref: attestationId,
      amount_micros: null,
      details: { verdict, protocol: order.protocol },
    }),
    evidence(order, {
      state: "capture",
      source: "ledger_capture",
      source_ref: capture.transactionId,
      amount_micros: capture.capturedMicros,
      details: {
        attestation_id: attestationId,
        paid_to: "platform_revenue",
        platform_revenue_micros: (capture.sellerMicros + capture.feeMicros).toString(),
        target_paid_micros: "0",
      },
    }),
    evidence(order, {
      state: "outcome",
      source: "verification_order",
      source_ref: order.id,
      amount_micros: capture.capturedMicros,
      details: { status: "completed", verdict, attestation_id: attestationId },
    }),
  ]);
}

/** The probe could not run through our fault: the whole hold goes back, with refund evidence. */
export async function releaseForOrder(trx: Knex.Transaction, order: OrderRow, reason: string): Promise<void> {
  const released = await releaseHold(
    { holdKey: orderHoldKey(order.id), idempotencyKey: releaseKey(order.id), metadata: { reason } },
    trx,
  );
  await appendEvidence(trx, [
    evidence(order, {
      state: "refund",
      source: "ledger_release",
      source_ref: released.transactionId,
      amount_micros: BigInt(order.price_micros),
      details: { reason },
    }),
    evidence(order, {
      state: "outcome",
      source: "verification_order",
      source_ref: order.id,
      amount_micros: 0n,
      details: { status: "not_run", reason },
    }),
  ]);
}
