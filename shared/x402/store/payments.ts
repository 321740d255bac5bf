import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";

/** docs/x402.md "x402 gateway": authorized → settling → submitted → settled | voided | settlement_failed. */
export type X402PaymentStatus =
  | "authorized"
  | "settling"
  | "submitted"
  | "settled"
  | "voided"
  | "settlement_failed";

export type X402Protocol = "x402v2" | "x402v1" | "mpp";

/** The EIP-3009 authorization as signed (decimal strings for the integers, 0x hex for the rest). */
export interface StoredAuthorization {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
}

export interface X402PaymentRow {
  id: string;
  quote_id: string;
  invocation_id: string;
  listing_id: string;
  seller_agent_id: string | null;
  protocol: X402Protocol;
  network: string;
  asset: string;
  pay_to: string;
  amount_micros: string;
  payer: string;
  authorization_nonce: string;
  valid_after: string;
  valid_before: string;
  signature: `0x${string}`;
  requirements: Record<string, unknown>;
  authorization: StoredAuthorization;
  challenge_id: string | null;
  status: X402PaymentStatus;
  tx_hash: `0x${string}` | null;
  block_number: string | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

export type NewX402Payment = Pick<
  X402PaymentRow,
  | "quote_id"
  | "invocation_id"
  | "listing_id"
  | "seller_agent_id"
  | "protocol"
  | "network"
  | "asset"
  | "pay_to"
  | "signature"
  | "requirements"
  | "authorization"
  | "challenge_id"
> & {
  amount_micros: bigint;
  payer: string;
  authorization_nonce: string;
  valid_after: bigint;
  valid_before: bigint;
};

/** The unique index a violation named: which rule refused a second payment. */
export type PaymentConflict = "payer_nonce" | "quote" | "invocation";

/** The rule a 23505 from insertX402Payment broke, or undefined for any other error. */
export function paymentConflict(error: unknown): PaymentConflict | undefined {
  const e = error as { code?: string; constraint?: string };
  if (e?.code !== "23505") return undefined;
  if (e.constraint === "x402_payments_payer_nonce") return "payer_nonce";
  if (e.constraint === "x402_payments_quote") return "quote";
  if (e.constraint === "x402_payments_invocation") return "invocation";
  return undefined;
}

export async function insertX402Payment(trx: Knex.Transaction, row: NewX402Payment): Promise<X402PaymentRow> {
  const [inserted] = await trx<X402PaymentRow>("x402_payments")
    .insert({
      ...row,
      payer: row.payer.toLowerCase(),
      authorization_nonce: row.authorization_nonce.toLowerCase(),
      amount_micros: row.amount_micros.toString(),
      valid_after: row.valid_after.toString(),
      valid_before: row.valid_before.toString(),
      requirements: JSON.stringify(row.requirements),
      authorization: JSON.stringify(row.authorization),
    } as never)
    .returning("*");
  return inserted!;
}

export async function findX402Payment(q: Db, id: string): Promise<X402PaymentRow | undefined> {
  return q<X402PaymentRow>("x402_payments").where({ id }).first();
}

/** The payment that used this authorization (payer + EIP-3009 nonce), if any. */
export async function findX402PaymentByNonce(
  q: Db,
  payer: string,
  nonce: string,
): Promise<X402PaymentRow | undefined> {
  return q<X402PaymentRow>("x402_payments")
    .where({ payer: payer.toLowerCase(), authorization_nonce: nonce.toLowerCase() })
    .first();
}

export async function findX402PaymentByInvocation(
  q: Db,
  invocationId: string,
): Promise<X402PaymentRow | undefined> {
  return q<X402PaymentRow>("x402_payments").where({ invocation_id: invocationId }).first();
}

/** Reads a payment under a row lock (the settlement's final transaction). */
export async function lockX402Payment(
  trx: Knex.Transaction,
  id: string,
): Promise<X402PaymentRow | undefined> {
  return trx<X402PaymentRow>("x402_payments").where({ id }).forUpdate().first();
}

/**
 * Moves a payment to `status` only from one of `from`; false when it was elsewhere (another run moved
 * it first), so each transition happens once.
 */
export async function moveX402Payment(
  q: Db,
  id: string,
  from: X402PaymentStatus[],
  change: {
    status: X402PaymentStatus;
    tx_hash?: string;
    block_number?: bigint;
    failure_reason?: string;
  },
): Promise<boolean> {
  const count = await q("x402_payments")
    .where({ id })
    .whereIn("status", from)
    .update({
      status: change.status,
      ...(change.tx_hash ? { tx_hash: change.tx_hash } : {}),
      ...(change.block_number !== undefined ? { block_number: change.block_number.toString() } : {}),
      ...(change.failure_reason ? { failure_reason: change.failure_reason } : {}),
      updated_at: q.fn.now(),
    });
  return count === 1;
}

/** Queues the payment's settlement job in the outbox (job id = payment id), once. */
export async function insertSettlementJob(trx: Knex.Transaction, paymentId: string): Promise<void> {
  await trx("job_outbox")
    .insert({
      queue: "settlement-confirmations",
      job_id: paymentId,
      payload: JSON.stringify({ settlement_id: paymentId }),
    })
    .onConflict(["queue", "job_id"])
    .ignore();
}

/** Payments on their way to the chain (settling, submitted) not updated for `seconds`: recovery checks their job. */
export async function listStaleSettlingPayments(q: Db, seconds: number, limit: number): Promise<string[]> {
  const rows = await q("x402_payments")
    .whereIn("status", ["settling", "submitted"])
    .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [seconds]))
    .orderBy("updated_at")
    .limit(limit)
    .select("id");
  return rows.map((r: { id: string }) => r.id);
}
