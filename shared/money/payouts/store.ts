import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";

// Seller payouts (docs/payments.md "Payouts"): one row per on-chain transfer of a seller's payable USDC.

export type PayoutStatus = "pending" | "submitted" | "confirmed" | "failed";

export const OPEN_PAYOUT_STATUSES: readonly PayoutStatus[] = ["pending", "submitted"];

export interface PayoutRow {
  id: string;
  seller_id: string;
  currency: "USDC";
  amount_micros: string;
  chain_id: number;
  to_address: string;
  status: PayoutStatus;
  batch_id: string;
  chain_transaction_id: string | null;
  tx_hash: string | null;
  block_number: string | null;
  block_hash: string | null;
  ledger_transaction_id: string | null;
  waiting_reason: string | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
  submitted_at: Date | null;
  resolved_at: Date | null;
}

export async function findPayout(q: Db, id: string): Promise<PayoutRow | undefined> {
  return q<PayoutRow>("payouts").where({ id }).first();
}

/** The payout row, locked until the transaction ends. */
export async function lockPayout(trx: Knex.Transaction, id: string): Promise<PayoutRow | undefined> {
  return trx<PayoutRow>("payouts").where({ id }).forUpdate().first();
}

/** The seller's open (pending or submitted) payout; the partial unique index allows at most one. */
export async function findOpenPayout(q: Db, sellerId: string): Promise<PayoutRow | undefined> {
  return q<PayoutRow>("payouts")
    .where({ seller_id: sellerId })
    .whereIn("status", OPEN_PAYOUT_STATUSES as PayoutStatus[])
    .first();
}

/** The seller's newest payouts, newest first. */
export async function listSellerPayouts(q: Db, sellerId: string, limit: number): Promise<PayoutRow[]> {
  return q<PayoutRow>("payouts")
    .where({ seller_id: sellerId })
    .orderBy([
      { column: "created_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit);
}

/** A payout to this address that failed within the last `hours` hours, if any (newest). */
export async function findRecentFailedPayout(
  q: Db,
  sellerId: string,
  toAddress: string,
  hours: number,
): Promise<PayoutRow | undefined> {
  return q<PayoutRow>("payouts")
    .where({ seller_id: sellerId, status: "failed" })
    .whereRaw("lower(to_address) = lower(?)", [toAddress])
    .andWhere("resolved_at", ">", q.raw("now() - make_interval(hours => ?)", [hours]))
    .orderBy("resolved_at", "desc")
    .first();
}

/**
 * Sellers whose payable USDC has reached the threshold, with a linked wallet and no open payout, in id
 * order after `after` (keyset paging). The caller re-checks each under the seller's payable-account lock.
 */
export async function payoutCandidates(
  q: Db,
  thresholdMicros: bigint,
  after: string | null,
  limit: number,
): Promise<string[]> {
  const rows = await q("ledger_accounts as a")
    .where({ "a.kind": "seller_payable", "a.currency": "USDC" })
    .andWhere("a.balance_micros", ">=", thresholdMicros.toString())
    .modify((query) => {
      if (after) query.andWhere("a.owner_agent_id", ">", after);
    })
    .whereExists((sub) =>
      sub
        .select(q.raw("1"))
        .from("wallet_links as w")
        .whereRaw("w.agent_id = a.owner_agent_id")
        .whereNull("w.unlinked_at"),
    )
    .whereNotExists((sub) =>
      sub
        .select(q.raw("1"))
        .from("payouts as p")
        .whereRaw("p.seller_id = a.owner_agent_id")
        .whereIn("p.status", OPEN_PAYOUT_STATUSES as PayoutStatus[]),
    )
    .orderBy("a.owner_agent_id")
    .limit(limit)
    .select("a.owner_agent_id as seller_id");
  return rows.map((r: { seller_id: string }) => r.seller_id);
}

/** Inserts a pending payout and its job in the outbox (job id = payout id), in the caller's transaction. */
export async function insertPayout(
  trx: Knex.Transaction,
  row: Pick<PayoutRow, "seller_id" | "chain_id" | "to_address" | "batch_id"> & { amount_micros: bigint },
): Promise<PayoutRow> {
  const [inserted] = await trx<PayoutRow>("payouts")
    .insert({ ...row, amount_micros: row.amount_micros.toString() })
    .returning("*");
  await insertPayoutJob(trx, "payouts", inserted!.id);
  return inserted!;
}

/** Queues a payout's job in the outbox, once per queue: submission (payouts) or confirmation. */
export async function insertPayoutJob(
  trx: Knex.Transaction,
  queue: "payouts" | "settlement-confirmations",
  payoutId: string,
): Promise<void> {
  await trx("job_outbox")
    .insert({ queue, job_id: payoutId, payload: JSON.stringify({ payout_id: payoutId }) })
    .onConflict(["queue", "job_id"])
    .ignore();
}

export interface PayoutChange {
  status?: PayoutStatus;
  chain_transaction_id?: string;
  tx_hash?: string;
  block_number?: bigint | null;
  block_hash?: string | null;
  ledger_transaction_id?: string;
  waiting_reason?: string | null;
  failure_reason?: string;
}

/** Moves a payout on only from one of the given statuses; false when it was not in one (someone else moved it). */
export async function movePayout(
  q: Db,
  id: string,
  from: readonly PayoutStatus[],
  change: PayoutChange,
): Promise<boolean> {
  const updated = await q("payouts")
    .where({ id })
    .whereIn("status", from as PayoutStatus[])
    .update({
      ...change,
      ...(change.block_number !== undefined ? { block_number: change.block_number?.toString() ?? null } : {}),
      ...(change.status === "submitted" ? { submitted_at: q.fn.now() } : {}),
      ...(change.status === "confirmed" || change.status === "failed" ? { resolved_at: q.fn.now() } : {}),
      updated_at: q.fn.now(),
    });
  return updated > 0;
}

/** Open payouts last touched more than `seconds` ago: the sweep re-drives their jobs. */
export async function staleOpenPayouts(q: Db, seconds: number, limit: number): Promise<PayoutRow[]> {
  return q<PayoutRow>("payouts")
    .whereIn("status", OPEN_PAYOUT_STATUSES as PayoutStatus[])
    .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [seconds]))
    .orderBy("updated_at")
    .limit(limit);
}
