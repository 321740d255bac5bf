import {
  type Address,
  BaseError,
  type Hex,
  isAddressEqual,
  type Log,
  parseEventLogs,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from "viem";
import { chainSettings, ERC20_ABI, publicClient } from "../../chain/client.js";
import { rebroadcast } from "../../chain/durable-tx.js";
import { rpcErrorSummary } from "../../chain/rpc-error.js";
import { findChainTxByHash } from "../../chain/transactions-store.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { logger } from "../../log.js";
import { appendEvidence } from "../evidence/store.js";
import { assertCustodyOpen, paidGate } from "../gate/availability.js";
import { creditDeposit } from "../ledger/flows.js";
import { retryTransient } from "../ledger/ledger.js";
import {
  type DepositRow,
  type DepositStatus,
  findDeposit,
  lockDeposit,
  markDepositCredited,
  markDepositRejected,
  recordDepositProgress,
} from "./store/deposits.js";

// Confirming a deposit on chain (the settlement-confirmations worker): read the receipt, find the USDC
// Transfer logs from the linked wallet (as frozen on the deposit at verify time) to the platform, wait
// for the confirmations, make sure the block is still canonical, then credit in one transaction with
// the evidence. Every check reads the chain afresh, so a reorganisation before the credit only delays it.
// A check that cannot decide yet returns "waiting" with when to look again; the worker re-delivers then.

/** How soon to look again for a transaction the chain has not shown yet. */
export const RECEIPT_POLL_MS = 2000;
/** How soon to look again while confirmations accumulate (a Base block is 2 s). */
export const CONFIRMATION_POLL_MS = 1000;
/** How soon to look again after the RPC failed. */
export const RPC_RETRY_MS = 10_000;
/** How soon to look again while paid execution (custody) is closed. */
export const GATE_CLOSED_RETRY_MS = 15_000;

export type DepositOutcome =
  | { status: "credited"; ledgerTransactionId: string; amountMicros: bigint }
  | { status: "rejected"; reason: RejectionReason }
  | { status: "already_final"; final: DepositStatus }
  | { status: "waiting"; reason: string; retryInMs: number }
  | { status: "unknown_deposit" };

export type RejectionReason =
  | "transaction_not_found"
  | "transaction_reverted"
  | "wrong_token"
  | "wrong_recipient"
  | "no_usdc_transfer_to_platform"
  | "sender_not_linked_wallet";

const isFinal = (status: DepositStatus) => status === "credited" || status === "rejected";

/**
 * The USDC the linked wallet sent to the platform in this receipt, or why there is none, most specific
 * reason first: USDC reached the platform from another address (sender_not_linked_wallet); another
 * token reached the platform (wrong_token); the linked wallet sent USDC elsewhere (wrong_recipient);
 * else no_usdc_transfer_to_platform.
 */
export function creditableTransfers(
  logs: Log[],
  rule: { token: Address; sender: Address; platform: Address },
): { amountMicros: bigint; logIndexes: number[] } | { reason: RejectionReason } {
  const all = parseEventLogs({ abi: ERC20_ABI, eventName: "Transfer", logs }).filter(
    (l) => l.args.value > 0n,
  );
  const transfers = all.filter((l) => isAddressEqual(l.address, rule.token));
  const toPlatform = transfers.filter((l) => isAddressEqual(l.args.to, rule.platform));
  const fromSender = toPlatform.filter((l) => isAddressEqual(l.args.from, rule.sender));
  if (fromSender.length > 0) {
    return {
      amountMicros: fromSender.reduce((sum: bigint, l) => sum + l.args.value, 0n),
      logIndexes: fromSender.map((l) => l.logIndex),
    };
  }
  if (toPlatform.length > 0) return { reason: "sender_not_linked_wallet" };
  if (all.some((l) => isAddressEqual(l.args.to, rule.platform))) return { reason: "wrong_token" };
  if (transfers.some((l) => isAddressEqual(l.args.from, rule.sender))) return { reason: "wrong_recipient" };
  return { reason: "no_usdc_transfer_to_platform" };
}

const waiting = (reason: string, retryInMs: number): DepositOutcome => ({
  status: "waiting",
  reason,
  retryInMs,
});

async function reject(
  d: DepositRow,
  reason: RejectionReason,
  receipt: TransactionReceipt | undefined,
): Promise<DepositOutcome> {
  const marked = await db().transaction(async (trx) => {
    const ok = await markDepositRejected(trx, d.id, {
      reason,
      block_number: receipt?.blockNumber ?? null,
      block_hash: receipt?.blockHash ?? null,
    });
    if (ok) {
      await appendEvidence(trx, {
        agent_id: d.agent_id,
        subject_type: "deposit",
        subject_id: d.id,
        state: "outcome",
        source: receipt ? "chain_receipt" : "chain_lookup",
        source_ref: d.tx_hash,
        details: {
          outcome: "rejected",
          reason,
          chain_id: d.chain_id,
          block_number: receipt ? Number(receipt.blockNumber) : null,
          block_hash: receipt?.blockHash ?? null,
          receipt_status: receipt?.status ?? null,
        },
      });
    }
    return ok;
  });
  if (!marked) return { status: "already_final", final: (await findDeposit(db(), d.id))!.status };
  logger().info({ deposit_id: d.id, reason }, "deposit rejected");
  return { status: "rejected", reason };
}

/**
 * One check of a deposit: credits it, rejects it, or says when to look again. Safe to run again and
 * twice at once: the credit locks the deposit row and posts under the ledger key
 * ledger:deposit:<chain id>:<tx hash>, so a transaction credits exactly once.
 */
export async function confirmDeposit(depositId: string): Promise<DepositOutcome> {
  const deposit = await findDeposit(db(), depositId);
  if (!deposit) return { status: "unknown_deposit" };
  if (isFinal(deposit.status)) return { status: "already_final", final: deposit.status };
  const config = getConfig();
  if (!chainSettings(config)) {
    await note(deposit, "settlement_rpc_not_configured");
    return waiting("settlement_rpc_not_configured", GATE_CLOSED_RETRY_MS);
  }
  if (config.chainId !== deposit.chain_id) {
    logger().warn({ deposit_id: deposit.id, chain_id: deposit.chain_id }, "deposit is on another chain");
    await note(deposit, "deposit_chain_not_configured");
    return waiting("deposit_chain_not_configured", GATE_CLOSED_RETRY_MS);
  }
  try {
    return await checkOnChain(deposit, config.chainId);
  } catch (err) {
    // Only a chain read is retried later here; anything else (the database) fails the job run.
    if (!(err instanceof BaseError)) throw err;
    logger().warn(
      { ...rpcErrorSummary(err), deposit_id: deposit.id },
      "deposit check failed on the RPC; retrying later",
    );
    await note(deposit, "settlement_rpc_unreachable");
    return waiting("settlement_rpc_unreachable", RPC_RETRY_MS);
  }
}

async function note(d: DepositRow, reason: string): Promise<void> {
  await recordDepositProgress(db(), d.id, {
    status: d.status as "pending" | "confirming",
    waiting_reason: reason,
  });
}

async function checkOnChain(deposit: DepositRow, chainId: number): Promise<DepositOutcome> {
  const client = publicClient();
  let receipt: TransactionReceipt;
  try {
    receipt = await client.getTransactionReceipt({ hash: deposit.tx_hash as Hex });
  } catch (err) {
    if (!(err instanceof TransactionReceiptNotFoundError)) throw err;
    await rebroadcastOwn(deposit);
    if (Date.now() >= deposit.not_found_deadline_at.getTime()) {
      return reject(deposit, "transaction_not_found", undefined);
    }
    await recordDepositProgress(db(), deposit.id, {
      status: "pending",
      amount_micros: null,
      block_number: null,
      block_hash: null,
      confirmations: 0,
      waiting_reason: "transaction_not_found_yet",
    });
    return waiting("transaction_not_found_yet", RECEIPT_POLL_MS);
  }
  if (receipt.status !== "success") return reject(deposit, "transaction_reverted", receipt);
  const found = creditableTransfers(receipt.logs, {
    token: deposit.token_address as Address,
    sender: deposit.sender_address as Address,
    platform: deposit.platform_address as Address,
  });
  if ("reason" in found) return reject(deposit, found.reason, receipt);

  const latest = await client.getBlockNumber({ cacheTime: 0 });
  const confirmations = Number(latest - receipt.blockNumber + 1n);
  const seen = {
    amount_micros: found.amountMicros,
    block_number: receipt.blockNumber,
    block_hash: receipt.blockHash,
    confirmations: Math.max(confirmations, 0),
  };
  if (confirmations < deposit.confirmations_required) {
    await recordDepositProgress(db(), deposit.id, {
      status: "confirming",
      ...seen,
      waiting_reason: "awaiting_confirmations",
    });
    return waiting("awaiting_confirmations", CONFIRMATION_POLL_MS);
  }
  // The receipt's block must still be the canonical block at its height (no reorganisation since).
  const block = await client.getBlock({ blockNumber: receipt.blockNumber });
  if (block.hash !== receipt.blockHash) {
    await recordDepositProgress(db(), deposit.id, {
      status: "pending",
      ...seen,
      waiting_reason: "chain_reorganized",
    });
    return waiting("chain_reorganized", RECEIPT_POLL_MS);
  }
  const gate = await paidGate();
  if (!gate.enabled) {
    const reason = `paid_execution_unavailable:${gate.reason ?? "unknown"}`;
    await recordDepositProgress(db(), deposit.id, { status: "confirming", ...seen, waiting_reason: reason });
    return waiting(reason, GATE_CLOSED_RETRY_MS);
  }
  try {
    return await credit(deposit, chainId, { ...seen, logIndexes: found.logIndexes });
  } catch (err) {
    // Custody froze between the gate read and the credit: the locked read in the transaction saw it.
    if (err instanceof AppError && err.code === "TEMPORARILY_UNAVAILABLE") {
      const reason = `paid_execution_unavailable:${String(err.details?.reason ?? "unknown")}`;
      await recordDepositProgress(db(), deposit.id, {
        status: "confirming",
        ...seen,
        waiting_reason: reason,
      });
      return waiting(reason, GATE_CLOSED_RETRY_MS);
    }
    throw err;
  }
}

/**
 * A gasless deposit's transaction is the platform's own (durable-tx, signed and recorded before it was
 * broadcast): if the chain has not seen it, the broadcast may have failed, so send the same bytes again.
 * Like an x402 settlement, a first broadcast waits for the gate. Best effort: the next check retries.
 */
async function rebroadcastOwn(d: DepositRow): Promise<void> {
  const tx = await findChainTxByHash(db(), d.tx_hash);
  if (!tx || (tx.status !== "signed" && tx.status !== "broadcast")) return;
  if (tx.status === "signed" && !(await paidGate()).enabled) return;
  await rebroadcast(tx).catch((err: unknown) => {
    logger().warn({ ...rpcErrorSummary(err), deposit_id: d.id }, "gasless deposit re-broadcast failed");
  });
}

async function credit(
  d: DepositRow,
  chainId: number,
  seen: {
    amount_micros: bigint;
    block_number: bigint;
    block_hash: Hex;
    confirmations: number;
    logIndexes: number[];
  },
): Promise<DepositOutcome> {
  return retryTransient(() =>
    db().transaction(async (trx): Promise<DepositOutcome> => {
      const locked = await lockDeposit(trx, d.id);
      if (!locked || isFinal(locked.status))
        return { status: "already_final", final: locked?.status ?? d.status };
      await assertCustodyOpen(trx);
      const posted = await creditDeposit(
        {
          agentId: d.agent_id,
          currency: "USDC",
          amountMicros: seen.amount_micros,
          reference: { type: "deposit", id: d.id },
          idempotencyKey: `ledger:deposit:${chainId}:${d.tx_hash}`,
          metadata: { tx_hash: d.tx_hash, chain_id: chainId, block_number: seen.block_number.toString() },
        },
        trx,
      );
      await markDepositCredited(trx, d.id, {
        amount_micros: seen.amount_micros,
        block_number: seen.block_number,
        block_hash: seen.block_hash,
        confirmations: seen.confirmations,
        ledger_transaction_id: posted.transactionId,
      });
      const common = { agent_id: d.agent_id, subject_type: "deposit", subject_id: d.id };
      await appendEvidence(trx, [
        {
          ...common,
          state: "confirmation",
          source: "chain_receipt",
          source_ref: d.tx_hash,
          amount_micros: seen.amount_micros,
          currency: "USDC",
          details: {
            chain_id: chainId,
            block_number: Number(seen.block_number),
            block_hash: seen.block_hash,
            confirmations: seen.confirmations,
            confirmations_required: d.confirmations_required,
            token_address: d.token_address,
            from_address: d.sender_address,
            to_address: d.platform_address,
            log_indexes: seen.logIndexes,
          },
        },
        {
          ...common,
          state: "deposit",
          source: "ledger_deposit",
          source_ref: posted.transactionId,
          amount_micros: seen.amount_micros,
          currency: "USDC",
          details: { idempotency_key: `ledger:deposit:${chainId}:${d.tx_hash}`, replayed: posted.replayed },
        },
      ]);
      logger().info({ deposit_id: d.id, amount_micros: seen.amount_micros.toString() }, "deposit credited");
      return {
        status: "credited",
        ledgerTransactionId: posted.transactionId,
        amountMicros: seen.amount_micros,
      };
    }),
  );
}
