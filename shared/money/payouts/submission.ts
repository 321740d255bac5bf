import { type Address, BaseError } from "viem";
import { recordAudit } from "../../audit/index.js";
import { ERC20_ABI } from "../../chain/client.js";
import { type ContractWrite, rebroadcast, type SendOptions, sendOnce } from "../../chain/durable-tx.js";
import { rpcErrorSummary } from "../../chain/rpc-error.js";
import { type ChainTxRow, findChainTx } from "../../chain/transactions-store.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { logger } from "../../log.js";
import { appendEvidence } from "../evidence/store.js";
import { assertCustodyOpen, readGate } from "../gate/availability.js";
import { enqueuePayoutJob } from "./payouts.js";
import { findPayout, insertPayoutJob, movePayout, type PayoutRow, type PayoutStatus } from "./store.js";

// Submitting a payout (the payouts worker, job {payout_id}). The transfer goes through durable-tx:
// signed and COMMITTED to chain_transactions before it is broadcast, one per ('payout', payout id), so a
// retry after a crash — even a SIGKILL between signing and broadcasting — re-broadcasts the recorded
// bytes or finds them mined, and never signs a second transfer. Nothing is signed or broadcast while
// the paid-execution gate is closed (custody frozen, rail down): the job looks again later.
//
//   pending ──(gate open)──► sign + record ──(custody re-read)──► broadcast ──► submitted
//   submitted: the settlement-confirmations worker takes over (payout-confirmation.ts)

export const PAYOUT_PURPOSE = "payout";

/** How soon to look again while paid execution (custody, RPC, signer) is closed. */
export const GATE_CLOSED_RETRY_MS = 15_000;
/** How soon to look again after the RPC or gas estimation failed before anything was signed. */
export const SUBMIT_RETRY_MS = 10_000;
/**
 * How soon to try the broadcast of a recorded transfer again. Short: a node that refuses a nonce gap
 * (an earlier platform transaction is not broadcast yet) accepts it as soon as the earlier one arrives.
 */
export const BROADCAST_RETRY_MS = 2_000;

export type PayoutSubmissionOutcome =
  | { status: "submitted"; txHash: string }
  | { status: "already_final"; final: PayoutStatus }
  | { status: "waiting"; reason: string; retryInMs: number }
  | { status: "unknown_payout" };

/** The USDC transfer of a payout: the configured token, to the address frozen on the payout. */
function transferCall(p: PayoutRow): ContractWrite {
  return {
    address: getConfig().usdcAddress,
    abi: ERC20_ABI,
    functionName: "transfer",
    args: [p.to_address as Address, BigInt(p.amount_micros)],
  };
}

async function wait(p: PayoutRow, reason: string, retryInMs: number): Promise<PayoutSubmissionOutcome> {
  await movePayout(db(), p.id, ["pending"], { waiting_reason: reason });
  return { status: "waiting", reason, retryInMs };
}

/** After the signed transfer is committed and before it is broadcast: the test pause, then custody afresh. */
function beforeBroadcast(p: PayoutRow, options: SendOptions) {
  return async (row: ChainTxRow) => {
    const pauseMs = getConfig().payoutPauseAfterSignMs;
    if (pauseMs > 0) {
      logger().warn(
        { payout_id: p.id, tx_hash: row.tx_hash, pause_ms: pauseMs },
        "PAYOUT_PAUSE_AFTER_SIGN_MS: pausing between recording and broadcasting a payout (fault injection)",
      );
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    await options.beforeBroadcast?.(row);
    // A freeze that committed after the gate read still stops the broadcast; the signed row waits.
    await db().transaction((trx) => assertCustodyOpen(trx));
  };
}

/** Records the broadcast transfer: payout submitted, settlement evidence, and its confirmation job. */
async function markSubmitted(p: PayoutRow, tx: ChainTxRow): Promise<void> {
  await db().transaction(async (trx) => {
    const moved = await movePayout(trx, p.id, ["pending"], {
      status: "submitted",
      chain_transaction_id: tx.id,
      tx_hash: tx.tx_hash,
      waiting_reason: "awaiting_confirmations",
    });
    if (!moved) return;
    await appendEvidence(trx, {
      agent_id: p.seller_id,
      subject_type: "payout",
      subject_id: p.id,
      state: "settlement",
      source: "tx_hash",
      source_ref: tx.tx_hash,
      amount_micros: BigInt(p.amount_micros),
      currency: p.currency,
      details: {
        status: "submitted",
        chain_id: tx.chain_id,
        from: tx.from_address,
        to: p.to_address,
        token: tx.to_address,
        nonce: tx.nonce,
        method: "transfer",
      },
    });
    await insertPayoutJob(trx, "settlement-confirmations", p.id);
    await recordAudit(trx, {
      action: "payout.submitted",
      subjectType: "payout",
      subjectId: p.id,
      data: { tx_hash: tx.tx_hash, nonce: tx.nonce, chain_transaction_id: tx.id },
    });
  });
}

/**
 * One pass over a payout's submission: signs, records and broadcasts its transfer when the gate is open
 * (or re-broadcasts the one already recorded), marks it submitted and queues its confirmation. Safe to
 * run again and twice at once: the chain transaction is one per payout, the move to submitted happens once.
 */
export async function processPayout(
  payoutId: string,
  options: SendOptions = {},
): Promise<PayoutSubmissionOutcome> {
  const payout = await findPayout(db(), payoutId);
  if (!payout) return { status: "unknown_payout" };
  if (payout.status === "confirmed" || payout.status === "failed") {
    return { status: "already_final", final: payout.status };
  }
  if (payout.status === "submitted") {
    // A crash after the move, before the confirmation job was sent: send it (a second send is harmless).
    await enqueuePayoutJob("settlement-confirmations", payout.id);
    return { status: "submitted", txHash: payout.tx_hash! };
  }
  const config = getConfig();
  if (!config.chainRpcUrl || config.chainId !== payout.chain_id) {
    return wait(payout, "payout_chain_not_configured", GATE_CLOSED_RETRY_MS);
  }
  let tx = await findChainTx(db(), PAYOUT_PURPOSE, payout.id);
  try {
    if (!tx || tx.status === "signed") {
      // Signing, or a first broadcast of bytes signed before a crash, moves money: only with the gate open.
      const gate = await readGate();
      if (!gate.enabled)
        return wait(payout, gate.reason ?? "paid_execution_unavailable", GATE_CLOSED_RETRY_MS);
    }
    tx = tx
      ? await rebroadcast(tx)
      : await sendOnce(PAYOUT_PURPOSE, payout.id, transferCall(payout), {
          beforeBroadcast: beforeBroadcast(payout, options),
        });
  } catch (err) {
    if (err instanceof AppError && err.code === "TEMPORARILY_UNAVAILABLE") {
      return wait(payout, String(err.details?.reason ?? "paid_execution_unavailable"), GATE_CLOSED_RETRY_MS);
    }
    if (!(err instanceof BaseError)) throw err;
    if (await findChainTx(db(), PAYOUT_PURPOSE, payout.id)) {
      // Signed and recorded, not broadcast yet: the same bytes go out on the next try.
      logger().warn({ ...rpcErrorSummary(err), payout_id: payout.id }, "payout broadcast failed; retrying");
      return wait(payout, `broadcast_failed:${rpcErrorSummary(err).error_name}`, BROADCAST_RETRY_MS);
    }
    // The RPC failed, or gas estimation says the transfer would revert (e.g. the hot wallet is short).
    logger().error(
      { ...rpcErrorSummary(err), payout_id: payout.id, amount_micros: payout.amount_micros },
      "payout not submitted: the RPC or gas estimation failed; retrying later (is the platform hot wallet funded?)",
    );
    return wait(payout, `submission_failed:${rpcErrorSummary(err).error_name}`, SUBMIT_RETRY_MS);
  }
  await markSubmitted(payout, tx);
  await enqueuePayoutJob("settlement-confirmations", payout.id);
  logger().info({ payout_id: payout.id, tx_hash: tx.tx_hash }, "payout submitted");
  return { status: "submitted", txHash: tx.tx_hash };
}
