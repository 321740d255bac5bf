import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";

// Seller bonds (docs/payments.md "Seller bond") and the facts the bond's good-standing rule reads.

export type StakeStatus = "posted" | "downgraded" | "released";

export interface StakeRow {
  id: string;
  agent_id: string;
  currency: "USDC";
  status: StakeStatus;
  posted_micros: string;
  bonded_micros: string;
  post_transaction_id: string;
  downgrade_transaction_id: string | null;
  release_transaction_id: string | null;
  posted_at: Date;
  downgraded_at: Date | null;
  released_at: Date | null;
}

/** The seller's open bond (posted or downgraded), if any. */
export async function findOpenStake(q: Db, agentId: string): Promise<StakeRow | undefined> {
  return q<StakeRow>("stakes").where({ agent_id: agentId }).whereNot({ status: "released" }).first();
}

/** The seller's newest bond, whatever its status. */
export async function findLatestStake(q: Db, agentId: string): Promise<StakeRow | undefined> {
  return q<StakeRow>("stakes")
    .where({ agent_id: agentId })
    .orderBy([
      { column: "posted_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .first();
}

/** Inserts a posted bond; the partial unique index refuses a second open bond for the same seller. */
export async function insertStake(
  trx: Knex.Transaction,
  row: { id: string; agent_id: string; amount_micros: bigint; post_transaction_id: string },
): Promise<StakeRow> {
  const [inserted] = await trx<StakeRow>("stakes")
    .insert({
      id: row.id,
      agent_id: row.agent_id,
      posted_micros: row.amount_micros.toString(),
      bonded_micros: row.amount_micros.toString(),
      post_transaction_id: row.post_transaction_id,
    })
    .returning("*");
  return inserted!;
}

/** Records a downgrade: the bonded amount drops to what stays, with the ledger transaction that moved the rest. */
export async function markStakeDowngraded(
  trx: Knex.Transaction,
  id: string,
  bondedMicros: bigint,
  transactionId: string,
): Promise<StakeRow> {
  const [row] = await trx<StakeRow>("stakes")
    .where({ id, status: "posted" })
    .update({
      status: "downgraded",
      bonded_micros: bondedMicros.toString(),
      downgrade_transaction_id: transactionId,
      downgraded_at: trx.fn.now() as unknown as Date,
    })
    .returning("*");
  if (!row) throw new Error(`stake ${id} is not posted`);
  return row;
}

/** Records the full release: nothing stays bonded. */
export async function markStakeReleased(
  trx: Knex.Transaction,
  id: string,
  transactionId: string,
): Promise<StakeRow> {
  const [row] = await trx<StakeRow>("stakes")
    .where({ id })
    .whereIn("status", ["posted", "downgraded"])
    .update({
      status: "released",
      bonded_micros: "0",
      release_transaction_id: transactionId,
      released_at: trx.fn.now() as unknown as Date,
    })
    .returning("*");
  if (!row) throw new Error(`stake ${id} is not open`);
  return row;
}

/** What the good-standing rule reads about a seller, over the last `days` days. */
export interface StandingFacts {
  failedListingIds: string[];
  paidCalls: number;
  refundedPaidCalls: number;
}

/**
 * The seller's live listings whose verdict is failed, and the paid calls routed to its listings in the
 * window with how many of them failed (a failed paid call is refunded: its hold is released).
 */
export async function readStandingFacts(q: Db, agentId: string, days: number): Promise<StandingFacts> {
  const failed = await q("listings")
    .where({ seller_id: agentId, status: "active", verification_status: "failed" })
    .orderBy("created_at")
    .pluck("id");
  const result = await q.raw(
    `select count(*) filter (where i.status in ('succeeded','failed'))::int as paid_calls,
            count(*) filter (where i.status = 'failed')::int as refunded_paid_calls
       from invocations i
       join listings l on l.id = i.listing_id
      where l.seller_id = ?
        and i.price_micros > 0
        and i.created_at > now() - make_interval(days => ?)`,
    [agentId, days],
  );
  const row = result.rows[0] as { paid_calls: number; refunded_paid_calls: number };
  return { failedListingIds: failed, paidCalls: row.paid_calls, refundedPaidCalls: row.refunded_paid_calls };
}

/** The seller's live listings, with their price: what the release rule checks. */
export async function liveListingPrices(
  q: Db,
  agentId: string,
): Promise<{ id: string; price_micros: string }[]> {
  return q("listings")
    .where({ seller_id: agentId, status: "active" })
    .orderBy("created_at")
    .select("id", "price_micros");
}
