import type { ListingRow } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { isUuid } from "../kernel/ids.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { type EvidenceRow, listEvidence } from "../money/index.js";
import {
  findInvocation,
  findReceiptForInvocation,
  type InvocationRow,
  listAttempts,
  type QuoteRow,
} from "../routing/index.js";
import { findX402PaymentByInvocation, type X402PaymentRow } from "./store/payments.js";

// What the x402 gateway shows about quotes, payments and settlements. Everything about money comes from
// evidence rows (DESIGN §4): a state without a row is null with a *_null_reason, never a guess.

const base = () => getConfig().publicBaseUrl;

export const x402StatusUrl = (invocationId: string) => `${base()}/api/x402/status/${invocationId}`;

/** A quote as the buyer sees it: what it pays for, how much, to whom, until when. */
export function quoteView(quote: QuoteRow, listing: ListingRow) {
  return {
    quote_id: quote.id,
    listing: { listing_id: listing.id, name: listing.name, slug: listing.slug },
    amount_usdc: formatUsdc(micros(quote.amount_micros)),
    amount_atomic: quote.amount_micros,
    currency: "USDC" as const,
    network: quote.network,
    asset: quote.asset,
    pay_to: quote.pay_to,
    expires_at: quote.expires_at.toISOString(),
  };
}

export type SettlementState =
  | "pending_submission"
  | "submitted"
  | "confirmed"
  | "settlement_failed"
  | "voided"
  | "not_started";

const EVIDENCE_STATES = ["challenge", "authorization", "execution", "settlement", "confirmation", "outcome"];
const NULL_REASONS: Record<string, string> = {
  challenge: "no_challenge_recorded",
  authorization: "no_authorization_recorded",
  execution: "call_not_succeeded",
  settlement: "settlement_not_submitted",
  confirmation: "settlement_not_confirmed",
  outcome: "payment_not_final",
};

/** The settlement state the evidence supports, and nothing beyond it. */
export function settlementState(payment: X402PaymentRow, rows: EvidenceRow[]): SettlementState {
  const has = (state: string) => rows.some((r) => r.state === state);
  const outcome = rows.find((r) => r.state === "outcome")?.details as { status?: string } | undefined;
  if (outcome?.status === "voided") return "voided";
  if (outcome?.status === "settlement_failed") return "settlement_failed";
  if (has("confirmation") && outcome?.status === "settled") return "confirmed";
  if (has("settlement")) return "submitted";
  if (has("execution") || payment.status === "settling") return "pending_submission";
  return "not_started";
}

/** The settlement block of an answer or status: state, transaction and block from evidence only. */
export function settlementView(payment: X402PaymentRow, rows: EvidenceRow[]) {
  const state = settlementState(payment, rows);
  const submitted = rows.find((r) => r.state === "settlement");
  const confirmed = rows.find((r) => r.state === "confirmation" && r.details.receipt_status !== "reverted");
  const evidence = Object.fromEntries(
    EVIDENCE_STATES.flatMap((name) => {
      const row = rows.find((r) => r.state === name);
      return [
        [
          name,
          row
            ? {
                at: row.created_at.toISOString(),
                source: row.source,
                source_ref: row.source_ref,
                amount_atomic: row.amount_micros,
                details: row.details,
              }
            : null,
        ],
        [`${name}_null_reason`, row ? null : NULL_REASONS[name]],
      ];
    }),
  );
  return {
    state,
    network: payment.network,
    asset: payment.asset,
    pay_to: payment.pay_to,
    payer: payment.payer,
    amount_atomic: payment.amount_micros,
    amount_usdc: formatUsdc(micros(payment.amount_micros)),
    transaction: submitted?.source_ref ?? null,
    transaction_null_reason: submitted
      ? null
      : state === "voided"
        ? "call_failed_nothing_submitted"
        : "not_submitted_yet",
    block_number: (confirmed?.details.block_number as string | undefined) ?? null,
    block_number_null_reason: confirmed ? null : "not_confirmed_yet",
    confirmations: (confirmed?.details.confirmations as number | undefined) ?? null,
    failure_reason: payment.failure_reason,
    evidence,
  };
}

/** The payment block: which protocol paid, for which quote, with which authorization. */
export function paymentView(payment: X402PaymentRow) {
  return {
    payment_id: payment.id,
    protocol: payment.protocol,
    quote_id: payment.quote_id,
    payer: payment.payer,
    authorization_nonce: payment.authorization_nonce,
    valid_before: payment.valid_before,
    status: payment.status,
  };
}

/** GET /api/x402/status/{invocation_id}: execution status plus the payment's settlement evidence. */
export async function x402StatusView(invocation: InvocationRow, payment: X402PaymentRow) {
  const [attempts, receipt, rows] = await Promise.all([
    listAttempts(db(), invocation.id),
    findReceiptForInvocation(db(), invocation.id),
    listEvidence(db(), "x402_payment", payment.id),
  ]);
  return {
    invocation_id: invocation.id,
    status: invocation.status,
    task: invocation.task,
    listing_id: invocation.listing_id,
    created_at: invocation.created_at.toISOString(),
    started_at: invocation.started_at?.toISOString() ?? null,
    completed_at: invocation.completed_at?.toISOString() ?? null,
    output: invocation.status === "succeeded" ? invocation.output : null,
    error: invocation.error,
    attempts: attempts.map((a) => ({
      attempt_no: a.attempt_no,
      status: a.status,
      error_code: a.error_code,
      http_status: a.http_status,
      latency_ms: a.latency_ms,
    })),
    receipt_id: receipt?.id ?? null,
    receipt_null_reason: receipt
      ? null
      : invocation.status === "failed"
        ? "call_failed_nothing_charged"
        : "call_not_finished",
    payment: paymentView(payment),
    settlement: settlementView(payment, rows),
    status_url: x402StatusUrl(invocation.id),
  };
}

/** GET /api/x402/status/{invocation_id}: anyone holding the (unguessable) id may read it. */
export async function x402Status(invocationId: string) {
  const invocation = isUuid(invocationId) ? await findInvocation(db(), invocationId) : undefined;
  const payment =
    invocation?.route === "x402" ? await findX402PaymentByInvocation(db(), invocationId) : undefined;
  if (!invocation || !payment) {
    throw new AppError("NOT_FOUND", "no x402 invocation with this id", { invocation_id: invocationId });
  }
  return x402StatusView(invocation, payment);
}
