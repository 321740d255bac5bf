import type { Knex } from "knex";
import type { Db } from "../db/knex.js";

export type ChainTxStatus = "signed" | "broadcast" | "mined" | "reverted";

export interface ChainTxRow {
  id: string;
  purpose: string;
  subject_id: string;
  chain_id: number;
  from_address: string;
  to_address: string;
  nonce: string;
  tx_hash: `0x${string}`;
  raw_tx: `0x${string}`;
  status: ChainTxStatus;
  block_number: string | null;
  error: string | null;
  created_at: Date;
  broadcast_at: Date | null;
  mined_at: Date | null;
}

export async function findChainTx(
  q: Db,
  purpose: string,
  subjectId: string,
): Promise<ChainTxRow | undefined> {
  return q<ChainTxRow>("chain_transactions").where({ purpose, subject_id: subjectId }).first();
}

/** The recorded platform transaction with this hash, if the platform signed it. */
export async function findChainTxByHash(q: Db, txHash: string): Promise<ChainTxRow | undefined> {
  return q<ChainTxRow>("chain_transactions")
    .where({ tx_hash: txHash.toLowerCase() as `0x${string}` })
    .first();
}

/**
 * Serialises signing for one sender across every process (a transaction-scoped advisory lock), so the
 * nonce read, the signature and the insert happen for one transaction at a time.
 */
export async function lockSender(trx: Knex.Transaction, chainId: number, from: string): Promise<void> {
  await trx.raw("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    `sender:${chainId}:${from.toLowerCase()}`,
  ]);
}

/** The next nonce we would use for a sender by our own records (the chain may know a higher one). */
export async function highestNonce(
  trx: Knex.Transaction,
  chainId: number,
  from: string,
): Promise<bigint | null> {
  const row = await trx("chain_transactions")
    .where({ chain_id: chainId, from_address: from.toLowerCase() })
    .max({ n: "nonce" })
    .first();
  return row?.n === null || row?.n === undefined ? null : BigInt(row.n);
}

export async function insertChainTx(
  trx: Knex.Transaction,
  row: Pick<ChainTxRow, "purpose" | "subject_id" | "chain_id" | "to_address" | "tx_hash" | "raw_tx"> & {
    from_address: string;
    nonce: bigint;
  },
): Promise<ChainTxRow> {
  const [inserted] = await trx<ChainTxRow>("chain_transactions")
    .insert({
      ...row,
      from_address: row.from_address.toLowerCase(),
      to_address: row.to_address.toLowerCase(),
      nonce: row.nonce.toString(),
    } as never)
    .returning("*");
  return inserted!;
}

export async function markChainTx(
  q: Db,
  id: string,
  change: { status: ChainTxStatus; block_number?: bigint | null; error?: string | null },
): Promise<void> {
  await q("chain_transactions")
    .where({ id })
    .update({
      status: change.status,
      ...(change.block_number !== undefined ? { block_number: change.block_number?.toString() ?? null } : {}),
      ...(change.error !== undefined ? { error: change.error } : {}),
      ...(change.status === "broadcast" ? { broadcast_at: q.fn.now() } : {}),
      ...(change.status === "mined" || change.status === "reverted" ? { mined_at: q.fn.now() } : {}),
    });
}

/** A sender's transactions recorded but never broadcast, older than `seconds` (a crash in between). */
export async function unsentBefore(
  q: Db,
  chainId: number,
  from: string,
  seconds: number,
): Promise<ChainTxRow[]> {
  return q<ChainTxRow>("chain_transactions")
    .where({ chain_id: chainId, from_address: from.toLowerCase(), status: "signed" })
    .andWhere("created_at", "<", q.raw("now() - make_interval(secs => ?)", [seconds]))
    .orderBy("nonce");
}
