import { type Address, BaseError, type TransactionReceipt } from "viem";
import { recordAudit } from "../../audit/index.js";
import { confirmation, rebroadcast } from "../../chain/durable-tx.js";
import { rpcErrorSummary } from "../../chain/rpc-error.js";
import { type ChainTxRow, findChainTx } from "../../chain/transactions-store.js";
import { findTransfer } from "../../chain/transfers.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { logger } from "../../log.js";
import { appendEvidence } from "../evidence/store.js";
import { recordPayout } from "../ledger/flows.js";
import { accountFor, platformAccount, retryTransient } from "../ledger/ledger.js";
import { lockAccounts } from "../ledger/store.js";
import { findPayout, lockPayout, movePayout, type PayoutRow, type PayoutStatus } from "./store.js";
import { PAYOUT_PURPOSE } from "./submission.js";

// Confirming a submitted payout (the settlement-confirmations worker, job {payout_id}). Once the
// transfer has CHAIN_CONFIRMATIONS blocks and its receipt shows the USDC Transfer to the frozen address,
// ONE transaction books it: recordPayout (seller payable → chain clearing, key ledger:payout:<id>),
// status confirmed, and confirmation + payout evidence (tx hash, block). A reverted transfer marks the
// payout failed: nothing left the ledger, so the amount is simply payable again (loud log, docs/payments.md says
// what an operator does). Every check re-reads the chain, so a reorg before booking only delays it.

/** How soon to look again while confirmations accumulate. */
export const CONFIRMATION_POLL_MS = 1000;
/** How soon to look again after the RPC failed, or for a payout its worker has not submitted yet. */
export const RETRY_MS = 10_000;

export type PayoutConfirmationOutcome =
  | { status: "confirmed"; txHash: string; blockNumber: bigint }
  | { status: "failed"; reason: string }
  | { status: "needs_operator"; reason: string }
  | { status: "already_final"; final: PayoutStatus }
  | { status: "waiting"; reason: string; retryInMs: number }
  | { status: "unknown_payout" };

async function wait(p: PayoutRow, reason: string, retryInMs: number): Promise<PayoutConfirmationOutcome> {
  await movePayout(db(), p.id, ["submitted"], { waiting_reason: reason });
  return { status: "waiting", reason, retryInMs };
}

/** The payout's USDC Transfer (platform → to_address, the amount) in a receipt: what proves it was paid. */
function payoutTransfer(p: PayoutRow, tx: ChainTxRow, receipt: TransactionReceipt) {
  return findTransfer(receipt.logs, {
    token: tx.to_address as Address,
    from: tx.from_address as Address,
    to: p.to_address as Address,
    value: BigInt(p.amount_micros),
  });
}

/** Books a confirmed payout in one transaction; the payable and clearing accounts are locked first, in id order. */
async function book(
  p: PayoutRow,
  tx: ChainTxRow,
  receipt: TransactionReceipt,
  confirmations: number,
  logIndex: number,
): Promise<PayoutConfirmationOutcome> {
  const amount = BigInt(p.amount_micros);
  const chain = {
    tx_hash: tx.tx_hash,
    chain_id: tx.chain_id,
    block_number: Number(receipt.blockNumber),
    block_hash: receipt.blockHash,
  };
  const final = await retryTransient(() =>
    db().transaction(async (trx) => {
      const payable = await accountFor(p.seller_id, "seller_payable", "USDC", trx);
      const clearing = await platformAccount("chain_clearing", "USDC", trx);
      await lockAccounts(trx, [payable.id, clearing.id]);
      const locked = await lockPayout(trx, p.id);
      if (locked?.status !== "submitted") return locked?.status ?? "confirmed";
      const ledger = await recordPayout(
        {
          agentId: p.seller_id,
          currency: "USDC",
          amountMicros: amount,
          reference: { type: "payout", id: p.id },
          idempotencyKey: `ledger:payout:${p.id}`,
          metadata: { ...chain, to_address: p.to_address },
        },
        trx,
      );
      await movePayout(trx, p.id, ["submitted"], {
        status: "confirmed",
        block_number: receipt.blockNumber,
        block_hash: receipt.blockHash,
        ledger_transaction_id: ledger.transactionId,
        waiting_reason: null,
      });
      const common = {
        agent_id: p.seller_id,
        subject_type: "payout",
        subject_id: p.id,
        amount_micros: amount,
        currency: p.currency,
      };
      await appendEvidence(trx, [
        {
          ...common,
          state: "confirmation",
          source: "tx_hash",
          source_ref: tx.tx_hash,
          details: { ...chain, confirmations, confirmations_required: getConfig().chainConfirmations },
        },
        {
          ...common,
          state: "payout",
          source: "tx_hash",
          source_ref: tx.tx_hash,
          details: {
            ...chain,
            log_index: logIndex,
            token: tx.to_address,
            from: tx.from_address,
            to: p.to_address,
            ledger_transaction_id: ledger.transactionId,
            ledger_idempotency_key: `ledger:payout:${p.id}`,
          },
        },
      ]);
      await recordAudit(trx, {
        action: "payout.confirmed",
        subjectType: "payout",
        subjectId: p.id,
        data: { ...chain, amount_micros: amount.toString(), ledger_transaction_id: ledger.transactionId },
      });
      return null;
    }),
  );
  if (final) return { status: "already_final", final };
  logger().info({ payout_id: p.id, tx_hash: tx.tx_hash }, "payout confirmed");
  return { status: "confirmed", txHash: tx.tx_hash, blockNumber: receipt.blockNumber };
}

/** A reverted transfer: payout failed with outcome evidence; the amount is payable again. Loud. */
async function fail(
  p: PayoutRow,
  tx: ChainTxRow,
  receipt: TransactionReceipt,
): Promise<PayoutConfirmationOutcome> {
  const reason = "transaction_reverted";
  const chain = {
    tx_hash: tx.tx_hash,
    block_number: Number(receipt.blockNumber),
    block_hash: receipt.blockHash,
  };
  const moved = await retryTransient(() =>
    db().transaction(async (trx) => {
      const payable = await accountFor(p.seller_id, "seller_payable", "USDC", trx);
      await lockAccounts(trx, [payable.id]);
      const ok = await movePayout(trx, p.id, ["submitted"], {
        status: "failed",
        failure_reason: reason,
        block_number: receipt.blockNumber,
        block_hash: receipt.blockHash,
        waiting_reason: null,
      });
      if (!ok) return false;
      await appendEvidence(trx, {
        agent_id: p.seller_id,
        subject_type: "payout",
        subject_id: p.id,
        state: "outcome",
        source: "tx_hash",
        source_ref: tx.tx_hash,
        amount_micros: 0n,
        currency: p.currency,
        details: { status: "failed", reason, ...chain, returned_to_payable_micros: p.amount_micros },
      });
      await recordAudit(trx, {
        action: "payout.failed",
        subjectType: "payout",
        subjectId: p.id,
        data: { reason, ...chain },
      });
      return true;
    }),
  );
  if (!moved) return { status: "already_final", final: (await findPayout(db(), p.id))!.status };
  logger().error(
    { payout_id: p.id, seller_id: p.seller_id, amount_micros: p.amount_micros, to: p.to_address, ...chain },
    "PAYOUT FAILED: the transfer reverted on chain; the amount is back in seller payable. Operator: read the revert on the explorer (docs/payments.md, Payouts)",
  );
  return { status: "failed", reason };
}

/**
 * One check of a submitted payout: books it once confirmed, fails it when reverted, or says when to look
 * again. Safe to run again and twice at once: booking locks the payout row and posts under
 * ledger:payout:<id>, so a payout is booked exactly once.
 */
export async function confirmPayout(payoutId: string): Promise<PayoutConfirmationOutcome> {
  const payout = await findPayout(db(), payoutId);
  if (!payout) return { status: "unknown_payout" };
  if (payout.status === "confirmed" || payout.status === "failed") {
    return { status: "already_final", final: payout.status };
  }
  // The payouts worker submits; this job only exists once it did, so pending means "look again".
  if (payout.status === "pending")
    return { status: "waiting", reason: "not_submitted_yet", retryInMs: RETRY_MS };
  const tx = await findChainTx(db(), PAYOUT_PURPOSE, payout.id);
  if (!tx) {
    logger().error({ payout_id: payout.id }, "submitted payout has no recorded chain transaction");
    return { status: "needs_operator", reason: "chain_transaction_missing" };
  }
  let state: Awaited<ReturnType<typeof confirmation>>;
  try {
    state = await confirmation(tx, getConfig().chainConfirmations);
    // Not mined yet: make sure the node still has our bytes (a dropped transaction is sent again, same bytes).
    if (state.state === "pending" && state.confirmations === 0) await rebroadcast(tx);
  } catch (err) {
    // Only a chain read is retried later here; anything else (the database) fails the job run.
    if (!(err instanceof BaseError)) throw err;
    logger().warn(
      { ...rpcErrorSummary(err), payout_id: payout.id },
      "payout check failed on the RPC; retrying later",
    );
    return wait(payout, "settlement_rpc_unreachable", RETRY_MS);
  }
  if (state.state === "pending") return wait(payout, "awaiting_confirmations", CONFIRMATION_POLL_MS);
  if (state.state === "reverted") return fail(payout, tx, state.receipt);
  const transfer = payoutTransfer(payout, tx, state.receipt);
  if (!transfer) {
    // The chain says success but shows no matching Transfer: never guess, never return the funds.
    logger().error(
      { payout_id: payout.id, tx_hash: tx.tx_hash },
      "PAYOUT NEEDS OPERATOR: mined without the expected USDC Transfer; funds stay reserved",
    );
    await movePayout(db(), payout.id, ["submitted"], { waiting_reason: "no_matching_usdc_transfer" });
    return { status: "needs_operator", reason: "no_matching_usdc_transfer" };
  }
  return book(payout, tx, state.receipt, state.confirmations, transfer.logIndex);
}
