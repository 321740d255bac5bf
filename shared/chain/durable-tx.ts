import {
  type Abi,
  type Address,
  encodeFunctionData,
  type Hex,
  keccak256,
  type TransactionReceipt,
} from "viem";
import { db } from "../db/knex.js";
import { chainSettings, platformSigner, platformWalletClient, publicClient } from "./client.js";
import {
  type ChainTxRow,
  findChainTx,
  highestNonce,
  insertChainTx,
  lockSender,
  markChainTx,
  unsentBefore,
} from "./transactions-store.js";

// Sending a platform transaction exactly once (docs/payments.md "On-chain transactions"). A settlement or payout
// must never go out twice, and must survive the worker dying between signing and confirmation:
//   1. under a per-sender lock, pick the nonce, sign, and COMMIT the signed bytes and hash — then
//   2. broadcast. A retry finds the row for (purpose, subject) and re-broadcasts the same bytes (the
//      chain accepts a transaction once) or reads its receipt. It never signs a second transaction.

export interface ContractWrite {
  address: Address;
  abi: Abi;
  functionName: string;
  args: readonly unknown[];
}

export interface SendOptions {
  /**
   * Runs after the signed transaction is committed and before it is broadcast: records what depends on
   * the hash (a gasless deposit's claim) before the transaction can exist on chain; crash tests.
   */
  beforeBroadcast?: (row: ChainTxRow) => Promise<void>;
}

/**
 * Signs and records `write` as the one transaction for (purpose, subjectId), then broadcasts it; if one
 * is already recorded, re-broadcasts that one instead. Returns the recorded row. A call that would
 * revert fails at gas estimation, before anything is signed or stored.
 */
export async function sendOnce(
  purpose: string,
  subjectId: string,
  write: ContractWrite,
  options: SendOptions = {},
): Promise<ChainTxRow> {
  const existing = await findChainTx(db(), purpose, subjectId);
  if (existing) return rebroadcast(existing);
  await sendStranded();
  const row = await signAndRecord(purpose, subjectId, write);
  if (options.beforeBroadcast) await options.beforeBroadcast(row);
  return rebroadcast(row);
}

async function signAndRecord(purpose: string, subjectId: string, write: ContractWrite): Promise<ChainTxRow> {
  const settings = chainSettings();
  const account = platformSigner();
  if (!settings || !account) throw new Error("no settlement chain or platform signer is configured");
  const wallet = platformWalletClient();
  const client = publicClient();
  return db().transaction(async (trx) => {
    await lockSender(trx, settings.chainId, account.address);
    // Another process may have recorded it while we waited for the lock.
    const raced = await findChainTx(trx, purpose, subjectId);
    if (raced) return raced;
    const ours = await highestNonce(trx, settings.chainId, account.address);
    const onChain = BigInt(
      await client.getTransactionCount({ address: account.address, blockTag: "pending" }),
    );
    const nonce = ours === null || onChain > ours ? onChain : ours + 1n;
    const data = encodeFunctionData({ abi: write.abi, functionName: write.functionName, args: write.args });
    const request = await wallet.prepareTransactionRequest({
      account,
      chain: wallet.chain,
      to: write.address,
      data,
      nonce: Number(nonce),
    });
    const raw = await account.signTransaction(request as Parameters<typeof account.signTransaction>[0]);
    return insertChainTx(trx, {
      purpose,
      subject_id: subjectId,
      chain_id: settings.chainId,
      from_address: account.address,
      to_address: write.address,
      nonce,
      tx_hash: keccak256(raw),
      raw_tx: raw,
    });
  });
}

/** How long a recorded transaction may stay unbroadcast before the next send treats it as stranded. */
const STRANDED_AFTER_SECONDS = 10;

/**
 * A transaction recorded but never broadcast (its process died in between, and nothing re-drives its
 * subject) would hold its nonce and stall every later transaction of the sender. Before signing a new one
 * we broadcast those first, oldest nonce first. Callers only send while the gate is open.
 */
async function sendStranded(): Promise<void> {
  const settings = chainSettings();
  const account = platformSigner();
  if (!settings || !account) return;
  for (const row of await unsentBefore(db(), settings.chainId, account.address, STRANDED_AFTER_SECONDS)) {
    await rebroadcast(row);
  }
}

/** Broadcasts a recorded transaction unless the chain already has it; a mined one is only marked. */
export async function rebroadcast(row: ChainTxRow): Promise<ChainTxRow> {
  if (row.status === "mined" || row.status === "reverted") return row;
  const client = publicClient();
  const receipt = await receiptOf(row.tx_hash);
  if (receipt) {
    const status = receipt.status === "success" ? "mined" : "reverted";
    await markChainTx(db(), row.id, { status, block_number: receipt.blockNumber });
    return { ...row, status, block_number: receipt.blockNumber.toString() };
  }
  try {
    await client.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex });
  } catch (error) {
    // "already known" / "nonce too low" for our own bytes: the node has it. Anything else is real.
    const known = await client.getTransaction({ hash: row.tx_hash }).catch(() => undefined);
    if (!known) throw error;
  }
  if (row.status === "signed") await markChainTx(db(), row.id, { status: "broadcast" });
  return { ...row, status: "broadcast" };
}

async function receiptOf(hash: Hex): Promise<TransactionReceipt | undefined> {
  try {
    return await publicClient().getTransactionReceipt({ hash });
  } catch (error) {
    if ((error as { name?: string }).name === "TransactionReceiptNotFoundError") return undefined;
    throw error;
  }
}

export type Confirmation =
  | { state: "pending"; confirmations: number }
  | { state: "confirmed"; confirmations: number; receipt: TransactionReceipt }
  | { state: "reverted"; receipt: TransactionReceipt };

/**
 * Where a recorded transaction stands: pending until `required` blocks (its own included) are on top of
 * the block that mined it. Re-reads the receipt each time, so a reorged transaction goes back to pending.
 */
export async function confirmation(row: ChainTxRow, required: number): Promise<Confirmation> {
  const receipt = await receiptOf(row.tx_hash);
  if (!receipt) return { state: "pending", confirmations: 0 };
  if (receipt.status !== "success") {
    await markChainTx(db(), row.id, { status: "reverted", block_number: receipt.blockNumber });
    return { state: "reverted", receipt };
  }
  if (row.status !== "mined")
    await markChainTx(db(), row.id, { status: "mined", block_number: receipt.blockNumber });
  const latest = await publicClient().getBlockNumber({ cacheTime: 0 });
  const confirmations = Number(latest - receipt.blockNumber + 1n);
  return confirmations >= required
    ? { state: "confirmed", confirmations, receipt }
    : { state: "pending", confirmations };
}
