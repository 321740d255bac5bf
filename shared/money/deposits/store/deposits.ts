import type { Knex } from "knex";
import type { Db } from "../../../db/knex.js";

// On-chain deposits (docs/payments.md "Deposits"). Status changes only move forward: every update of a deposit's
// progress is conditional on it not being final yet, so a late or duplicate worker run cannot undo a
// credit or a rejection.

export const DEPOSIT_STATUSES = ["pending", "confirming", "credited", "rejected"] as const;
export type DepositStatus = (typeof DEPOSIT_STATUSES)[number];
const OPEN: DepositStatus[] = ["pending", "confirming"];

export interface DepositRow {
  id: string;
  agent_id: string;
  chain_id: number;
  tx_hash: string;
  sender_address: string;
  platform_address: string;
  token_address: string;
  currency: "USDC";
  status: DepositStatus;
  amount_micros: bigint | null;
  block_number: bigint | null;
  block_hash: string | null;
  confirmations: number;
  confirmations_required: number;
  waiting_reason: string | null;
  rejected_reason: string | null;
  ledger_transaction_id: string | null;
  request_id: string | null;
  not_found_deadline_at: Date;
  last_checked_at: Date | null;
  created_at: Date;
  updated_at: Date;
  resolved_at: Date | null;
}

type RawDeposit = Omit<DepositRow, "amount_micros" | "block_number"> & {
  amount_micros: string | null;
  block_number: string | null;
};

function toDeposit(row: RawDeposit): DepositRow {
  return {
    ...row,
    amount_micros: row.amount_micros === null ? null : BigInt(row.amount_micros),
    block_number: row.block_number === null ? null : BigInt(row.block_number),
  };
}

export type NewDeposit = Pick<
  DepositRow,
  | "agent_id"
  | "chain_id"
  | "tx_hash"
  | "sender_address"
  | "platform_address"
  | "token_address"
  | "confirmations_required"
  | "request_id"
  | "not_found_deadline_at"
>;

/**
 * Records a deposit claim with its confirmation job in the outbox (job id = deposit id), or returns
 * undefined when that (chain, tx hash) was claimed before — by anyone. Give it a transaction.
 */
export async function insertDeposit(trx: Knex.Transaction, row: NewDeposit): Promise<DepositRow | undefined> {
  const [inserted] = await trx<RawDeposit>("deposits")
    .insert(row)
    .onConflict(["chain_id", "tx_hash"])
    .ignore()
    .returning("*");
  if (!inserted) return undefined;
  await insertDepositJob(trx, inserted.id);
  return toDeposit(inserted);
}

/** The outbox row of a deposit's confirmation job (the sweeper sends it if the direct enqueue is lost). */
export async function insertDepositJob(q: Db, depositId: string): Promise<void> {
  await q("job_outbox")
    .insert({
      queue: "settlement-confirmations",
      job_id: depositId,
      payload: JSON.stringify({ deposit_id: depositId }),
    })
    .onConflict(["queue", "job_id"])
    .ignore();
}

export async function findDepositByTx(
  q: Db,
  chainId: number,
  txHash: string,
): Promise<DepositRow | undefined> {
  const row = await q<RawDeposit>("deposits").where({ chain_id: chainId, tx_hash: txHash }).first();
  return row ? toDeposit(row) : undefined;
}

export async function findDeposit(q: Db, id: string): Promise<DepositRow | undefined> {
  const row = await q<RawDeposit>("deposits").where({ id }).first();
  return row ? toDeposit(row) : undefined;
}

/** The agent's own deposit (another agent's reads as absent). */
export async function findAgentDeposit(q: Db, agentId: string, id: string): Promise<DepositRow | undefined> {
  const row = await q<RawDeposit>("deposits").where({ id, agent_id: agentId }).first();
  return row ? toDeposit(row) : undefined;
}

/** Locks a deposit for its final transition (credit). */
export async function lockDeposit(trx: Knex.Transaction, id: string): Promise<DepositRow | undefined> {
  const row = await trx<RawDeposit>("deposits").where({ id }).forUpdate().first();
  return row ? toDeposit(row) : undefined;
}

/** An agent's deposits, newest first: the open ones, or the final ones. */
export async function listAgentDeposits(
  q: Db,
  agentId: string,
  which: "open" | "final",
  limit: number,
): Promise<DepositRow[]> {
  const rows = await q<RawDeposit>("deposits")
    .where({ agent_id: agentId })
    .modify((b) => (which === "open" ? b.whereIn("status", OPEN) : b.whereNotIn("status", OPEN)))
    .orderBy([
      { column: "created_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit);
  return rows.map(toDeposit);
}

export interface DepositProgress {
  status: "pending" | "confirming";
  amount_micros?: bigint | null;
  block_number?: bigint | null;
  block_hash?: string | null;
  confirmations?: number;
  waiting_reason: string | null;
}

/** Records what a check saw while the deposit is still open; a final deposit is left alone. */
export async function recordDepositProgress(q: Db, id: string, p: DepositProgress): Promise<void> {
  await q("deposits")
    .where({ id })
    .whereIn("status", OPEN)
    .update({
      status: p.status,
      ...(p.amount_micros !== undefined ? { amount_micros: p.amount_micros?.toString() ?? null } : {}),
      ...(p.block_number !== undefined ? { block_number: p.block_number?.toString() ?? null } : {}),
      ...(p.block_hash !== undefined ? { block_hash: p.block_hash } : {}),
      ...(p.confirmations !== undefined ? { confirmations: p.confirmations } : {}),
      waiting_reason: p.waiting_reason,
      last_checked_at: q.fn.now(),
      updated_at: q.fn.now(),
    });
}

/** Marks an open deposit credited; false when it was already final. */
export async function markDepositCredited(
  q: Db,
  id: string,
  c: {
    amount_micros: bigint;
    block_number: bigint;
    block_hash: string;
    confirmations: number;
    ledger_transaction_id: string;
  },
): Promise<boolean> {
  const count = await q("deposits").where({ id }).whereIn("status", OPEN).update({
    status: "credited",
    amount_micros: c.amount_micros.toString(),
    block_number: c.block_number.toString(),
    block_hash: c.block_hash,
    confirmations: c.confirmations,
    ledger_transaction_id: c.ledger_transaction_id,
    waiting_reason: null,
    last_checked_at: q.fn.now(),
    updated_at: q.fn.now(),
    resolved_at: q.fn.now(),
  });
  return count === 1;
}

/** Marks an open deposit rejected with its reason; false when it was already final. */
export async function markDepositRejected(
  q: Db,
  id: string,
  r: {
    reason: string;
    amount_micros?: bigint | null;
    block_number?: bigint | null;
    block_hash?: string | null;
  },
): Promise<boolean> {
  const count = await q("deposits")
    .where({ id })
    .whereIn("status", OPEN)
    .update({
      status: "rejected",
      rejected_reason: r.reason,
      ...(r.amount_micros !== undefined ? { amount_micros: r.amount_micros?.toString() ?? null } : {}),
      ...(r.block_number !== undefined ? { block_number: r.block_number?.toString() ?? null } : {}),
      ...(r.block_hash !== undefined ? { block_hash: r.block_hash } : {}),
      waiting_reason: null,
      last_checked_at: q.fn.now(),
      updated_at: q.fn.now(),
      resolved_at: q.fn.now(),
    });
  return count === 1;
}

/**
 * Reopens a deposit rejected only because its transaction was not found in time (submitted before it
 * was broadcast, or dropped and re-sent): it goes back to pending with a new deadline. No other
 * rejection is reopened — a revert or a transfer to the wrong address is a fact of the chain.
 */
export async function reopenNotFoundDeposit(
  q: Db,
  id: string,
  deadline: Date,
): Promise<DepositRow | undefined> {
  const [row] = await q<RawDeposit>("deposits")
    .where({ id, status: "rejected", rejected_reason: "transaction_not_found" })
    .update({
      status: "pending",
      rejected_reason: null,
      waiting_reason: null,
      not_found_deadline_at: deadline,
      updated_at: q.fn.now(),
      resolved_at: null,
    })
    .returning("*");
  return row ? toDeposit(row) : undefined;
}

/** Open deposits (pending, confirming) not updated for `seconds`: the recovery sweep checks their job. */
export async function listStaleOpenDeposits(q: Db, seconds: number, limit: number): Promise<string[]> {
  const rows = await q("deposits")
    .whereIn("status", ["pending", "confirming"])
    .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [seconds]))
    .orderBy("updated_at")
    .limit(limit)
    .select("id");
  return rows.map((r: { id: string }) => r.id);
}
