import type { Knex } from "knex";
import { AppError } from "../errors.js";
import { formatUsdc } from "../kernel/money.js";
import {
  captureHold,
  type HeldFunds,
  holdFunds,
  type PostEvidence,
  releaseHold,
  THIS_TRANSACTION,
} from "../money/index.js";
import type { OrderRow } from "./store/orders.js";

// The money of a verification order (docs/verification.md "Money"). The platform is the seller: the hold
// is captured with no seller agent, so the whole price goes to platform_revenue (the ledger still shows
// the 97/3 split as two revenue legs). Hold in the order's own transaction; capture when the probe ran,
// whatever the verdict; release when it could not run through our fault. Every step is keyed by the
// order id (one key per order, and a monitoring run is its own order), so a redelivered job never
// charges twice, and each writes its evidence rows with its ledger movement, in the movement's own
// statement (PostTransactionInput.evidence). A capture or release names the hold by what the order's row
// says it holds, and its lock checks that (HoldResolution.expected): no read of the hold first.

export const orderHoldKey = (orderId: string) => `verification:hold:${orderId}`;
const captureKey = (orderId: string) => `verification:capture:${orderId}`;
const releaseKey = (orderId: string) => `verification:release:${orderId}`;

const SUBJECT = "verification_order";

function evidence(
  order: Pick<OrderRow, "id" | "buyer_agent_id">,
  e: Omit<PostEvidence, "agent_id" | "invocation_id" | "subject_type" | "subject_id" | "currency">,
): PostEvidence {
  return {
    agent_id: order.buyer_agent_id,
    invocation_id: null,
    subject_type: SUBJECT,
    subject_id: order.id,
    currency: "USDC",
    ...e,
  };
}

/** What the order's hold holds, by its row: the buyer's USDC, the order's price, for the order. */
function expectedHold(order: Pick<OrderRow, "id" | "buyer_agent_id" | "price_micros">): HeldFunds {
  return {
    agentId: order.buyer_agent_id,
    currency: "USDC",
    amountMicros: BigInt(order.price_micros),
    reference: { type: SUBJECT, id: order.id },
  };
}

/**
 * Holds the order's price in the caller's transaction, with its authorization evidence; short funds →
 * 402 saying how to fund, nothing written.
 */
export async function holdForOrder(
  trx: Knex.Transaction,
  order: Pick<OrderRow, "id" | "buyer_agent_id" | "api_key_id" | "protocol" | "price_micros">,
  route: string,
): Promise<void> {
  const priceMicros = BigInt(order.price_micros);
  try {
    await holdFunds(
      {
        agentId: order.buyer_agent_id,
        currency: "USDC",
        amountMicros: priceMicros,
        reference: { type: SUBJECT, id: order.id },
        idempotencyKey: orderHoldKey(order.id),
        metadata: { route, protocol: order.protocol },
        evidence: [
          evidence(order, {
            state: "authorization",
            source: "ledger_hold",
            source_ref: THIS_TRANSACTION,
            amount_micros: priceMicros,
            details: { api_key_id: order.api_key_id, route, listed_price_micros: priceMicros.toString() },
          }),
        ],
      },
      trx,
    );
  } catch (error) {
    if (error instanceof AppError && error.code === "PAYMENT_REQUIRED")
      throw fundingNeeded(error, priceMicros);
    throw error;
  }
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
  await captureHold(
    {
      holdKey: orderHoldKey(order.id),
      expected: expectedHold(order),
      idempotencyKey: captureKey(order.id),
      sellerAgentId: null,
      metadata: { verification_order_id: order.id, attestation_id: attestationId },
      evidence: (split) => [
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
          source_ref: THIS_TRANSACTION,
          amount_micros: split.capturedMicros,
          details: {
            attestation_id: attestationId,
            paid_to: "platform_revenue",
            platform_revenue_micros: (split.sellerMicros + split.feeMicros).toString(),
            target_paid_micros: "0",
          },
        }),
        evidence(order, {
          state: "outcome",
          source: "verification_order",
          source_ref: order.id,
          amount_micros: split.capturedMicros,
          details: { status: "completed", verdict, attestation_id: attestationId },
        }),
      ],
    },
    trx,
  );
}

/** The probe could not run through our fault: the whole hold goes back, with refund evidence. */
export async function releaseForOrder(trx: Knex.Transaction, order: OrderRow, reason: string): Promise<void> {
  await releaseHold(
    {
      holdKey: orderHoldKey(order.id),
      expected: expectedHold(order),
      idempotencyKey: releaseKey(order.id),
      metadata: { reason },
      evidence: [
        evidence(order, {
          state: "refund",
          source: "ledger_release",
          source_ref: THIS_TRANSACTION,
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
      ],
    },
    trx,
  );
}
