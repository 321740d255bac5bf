import type { Address, Hex, TransactionReceipt } from "viem";
import { EIP3009_ABI } from "../chain/client.js";
import {
  type ContractWrite,
  confirmation,
  rebroadcast,
  type SendOptions,
  sendOnce,
} from "../chain/durable-tx.js";
import { authorizationUsed } from "../chain/eip3009.js";
import { type ChainTxRow, findChainTx } from "../chain/transactions-store.js";
import { findTransfer } from "../chain/transfers.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { logger } from "../log.js";
import { appendEvidence, readGate, recordX402Settlement, retryTransient } from "../money/index.js";
import { paymentEvidence } from "./payments.js";
import { type PaymentRequirements, verifyPresented } from "./protocol.js";
import {
  findX402Payment,
  lockX402Payment,
  moveX402Payment,
  type X402PaymentRow,
  type X402PaymentStatus,
} from "./store/payments.js";

// Settling an x402 payment (docs/x402.md "x402 gateway"). Once its call succeeded (x402-payments.ts: the
// payment is `settling` and its job queued), the settlement-confirmations worker runs
// processX402Settlement until the payment is final:
//
//   settling ──(gate open, fresh verify)──► sign + record (durable-tx) ──► broadcast ──► submitted
//   submitted ──(confirmations reached)──► ONE transaction: confirmation evidence, ledger (97/3),
//                                          outcome evidence, status settled
//   reverted / authorization expired / nonce consumed elsewhere / no matching Transfer ─► settlement_failed
//
// Every step is keyed by the payment id: the chain transaction is one per ('x402_settlement', payment),
// evidence is one row per state, the ledger posting has key ledger:x402:<payment id>.

export const SETTLEMENT_PURPOSE = "x402_settlement";

/** How soon to look again while confirmations accumulate. */
export const CONFIRMATION_POLL_MS = 1000;
/** How soon to look again while paid execution (custody, RPC, signer) is closed. */
export const GATE_CLOSED_RETRY_MS = 5000;
/** How soon to retry a verification or submission that failed while the authorization is still valid. */
export const VERIFY_RETRY_MS = 5000;
/** Stop trying to submit this long before validBefore: the transaction must be mined while it is valid. */
const EXPIRY_MARGIN_SECONDS = 15n;

export type X402SettlementOutcome =
  | { status: "settled"; txHash: string; blockNumber: bigint }
  | { status: "settlement_failed"; reason: string }
  | { status: "already_final"; final: X402PaymentStatus }
  | { status: "waiting"; reason: string; retryInMs: number }
  | { status: "not_settleable"; reason: string }
  | { status: "unknown_payment" };

const waiting = (reason: string, retryInMs: number): X402SettlementOutcome => ({
  status: "waiting",
  reason,
  retryInMs,
});

/** transferWithAuthorization in its bytes-signature form (USDC v2.2 and our TestUSDC have it). */
function transferCall(p: X402PaymentRow): ContractWrite {
  const a = p.authorization;
  return {
    address: p.asset as Address,
    abi: EIP3009_ABI,
    functionName: "transferWithAuthorization",
    args: [
      a.from as Address,
      a.to as Address,
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce as Hex,
      p.signature,
    ],
  };
}

const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

/** A payment that cannot be settled: outcome evidence, status settlement_failed, and a loud log. */
async function failSettlement(
  p: X402PaymentRow,
  reason: string,
  from: X402PaymentStatus[],
  details: Record<string, unknown> = {},
): Promise<X402SettlementOutcome> {
  const moved = await db().transaction(async (trx) => {
    const ok = await moveX402Payment(trx, p.id, from, {
      status: "settlement_failed",
      failure_reason: reason,
    });
    if (ok) {
      await appendEvidence(
        trx,
        paymentEvidence(p, {
          state: "outcome",
          source: details.tx_hash ? "tx_hash" : "settlement_worker",
          source_ref: (details.tx_hash as string | undefined) ?? null,
          amount_micros: 0n,
          details: { status: "settlement_failed", reason, ...details },
        }),
      );
    }
    return ok;
  });
  if (!moved) return { status: "already_final", final: (await findX402Payment(db(), p.id))!.status };
  // The seller did the work and was not paid: an operator must look (docs/x402.md "x402 gateway", failures).
  logger().error(
    { payment_id: p.id, invocation_id: p.invocation_id, reason, payer: p.payer, ...details },
    "x402 SETTLEMENT FAILED: a completed call was not paid on chain; operator action needed",
  );
  return { status: "settlement_failed", reason };
}

/** Not settled yet and still worth retrying until the authorization is about to expire. */
async function retryOrExpire(p: X402PaymentRow, reason: string): Promise<X402SettlementOutcome> {
  if (nowSeconds() + EXPIRY_MARGIN_SECONDS >= BigInt(p.valid_before)) {
    return failSettlement(p, `authorization_expired_before_settlement:${reason}`, ["settling"]);
  }
  logger().warn({ payment_id: p.id, reason }, "x402 settlement not submitted yet; retrying");
  return waiting(reason, VERIFY_RETRY_MS);
}

/** Verifies afresh and submits the transfer; a recorded transaction or why not. */
async function submit(p: X402PaymentRow, options: SendOptions): Promise<ChainTxRow | X402SettlementOutcome> {
  if (nowSeconds() + EXPIRY_MARGIN_SECONDS >= BigInt(p.valid_before)) {
    return failSettlement(p, "authorization_expired_before_settlement", ["settling"]);
  }
  const verdict = await verifyPresented(
    { id: p.quote_id, amount_micros: p.amount_micros, network: p.network, asset: p.asset, pay_to: p.pay_to },
    {
      protocol: p.protocol,
      header: "stored",
      scheme: "exact",
      network: p.network,
      authorization: p.authorization,
      signature: p.signature,
    },
    p.requirements as unknown as PaymentRequirements,
  ).catch((err: unknown) => ({ isValid: false, invalidReason: `verify_error:${(err as Error).message}` }));
  if (!verdict.isValid) {
    // We have recorded no transaction for it, so a used nonce means the payer spent or cancelled the
    // authorization elsewhere: no retry can settle it any more.
    const consumed = await authorizationUsed(p.asset, p.payer, p.authorization_nonce).catch(() => false);
    if (consumed) return failSettlement(p, "authorization_nonce_consumed_elsewhere", ["settling"]);
    return retryOrExpire(p, verdict.invalidReason ?? "verification_failed");
  }
  try {
    return await sendOnce(SETTLEMENT_PURPOSE, p.id, transferCall(p), options);
  } catch (err) {
    return retryOrExpire(p, `submission_failed:${(err as Error).message.split("\n")[0]}`);
  }
}

/** The matching USDC Transfer (payer → payTo, the amount) in a receipt: what proves the payment. */
function transferMatches(p: X402PaymentRow, receipt: TransactionReceipt): boolean {
  const expected = {
    token: p.asset as Address,
    from: p.payer as Address,
    to: p.pay_to as Address,
    value: BigInt(p.amount_micros),
  };
  return findTransfer(receipt.logs, expected) !== undefined;
}

/** Confirmed on chain: in ONE transaction, confirmation evidence, the ledger posting, outcome, settled. */
async function finishSettled(
  p: X402PaymentRow,
  tx: ChainTxRow,
  receipt: TransactionReceipt,
  confirmations: number,
): Promise<X402SettlementOutcome> {
  const done = await retryTransient(() =>
    db().transaction(async (trx) => {
      const locked = await lockX402Payment(trx, p.id);
      if (locked?.status !== "submitted") return locked?.status ?? "settled";
      const chain = {
        tx_hash: tx.tx_hash,
        block_number: receipt.blockNumber.toString(),
        block_hash: receipt.blockHash,
      };
      const ledger = await recordX402Settlement(
        {
          paymentId: p.id,
          amountMicros: BigInt(p.amount_micros),
          sellerAgentId: p.seller_agent_id,
          metadata: { invocation_id: p.invocation_id, listing_id: p.listing_id, ...chain },
        },
        trx,
      );
      await appendEvidence(trx, [
        paymentEvidence(p, {
          state: "confirmation",
          source: "tx_hash",
          source_ref: tx.tx_hash,
          amount_micros: BigInt(p.amount_micros),
          details: { ...chain, confirmations, required_confirmations: getConfig().chainConfirmations },
        }),
        paymentEvidence(p, {
          state: "outcome",
          source: "ledger_x402_settlement",
          source_ref: ledger.transactionId,
          amount_micros: BigInt(p.amount_micros),
          details: {
            status: "settled",
            seller_agent_id: p.seller_agent_id,
            seller_micros: ledger.sellerMicros.toString(),
            platform_fee_micros: ledger.feeMicros.toString(),
            ...chain,
          },
        }),
      ]);
      await moveX402Payment(trx, p.id, ["submitted"], {
        status: "settled",
        block_number: receipt.blockNumber,
      });
      return null;
    }),
  );
  if (done) return { status: "already_final", final: done };
  logger().info({ payment_id: p.id, tx_hash: tx.tx_hash }, "x402 payment settled");
  return { status: "settled", txHash: tx.tx_hash, blockNumber: receipt.blockNumber };
}

/** Records the broadcast transaction as settlement evidence (submitted), once. */
async function markSubmitted(p: X402PaymentRow, tx: ChainTxRow): Promise<void> {
  await db().transaction(async (trx) => {
    await appendEvidence(
      trx,
      paymentEvidence(p, {
        state: "settlement",
        source: "tx_hash",
        source_ref: tx.tx_hash,
        amount_micros: BigInt(p.amount_micros),
        details: {
          status: "submitted",
          chain_id: tx.chain_id,
          from: tx.from_address,
          nonce: tx.nonce,
          method: "transferWithAuthorization",
        },
      }),
    );
    await moveX402Payment(trx, p.id, ["settling"], { status: "submitted", tx_hash: tx.tx_hash });
  });
}

/**
 * One pass over an x402 payment's settlement (the settlement-confirmations worker, job {settlement_id}):
 * submits it when the gate is open and nothing was submitted yet, re-broadcasts a recorded one, then
 * confirms. Returns when to look again while it cannot decide. Safe to run again and twice at once.
 */
export async function processX402Settlement(
  paymentId: string,
  options: SendOptions = {},
): Promise<X402SettlementOutcome> {
  const payment = await findX402Payment(db(), paymentId);
  if (!payment) return { status: "unknown_payment" };
  if (["settled", "settlement_failed", "voided"].includes(payment.status)) {
    return { status: "already_final", final: payment.status };
  }
  if (payment.status === "authorized") return { status: "not_settleable", reason: "call_not_succeeded" };
  const config = getConfig();
  if (!config.chainRpcUrl || payment.network !== `eip155:${config.chainId}`) {
    return waiting("payment_chain_not_configured", GATE_CLOSED_RETRY_MS);
  }
  let tx = await findChainTx(db(), SETTLEMENT_PURPOSE, payment.id);
  try {
    if (!tx || tx.status === "signed") {
      // Submitting (or a first broadcast of bytes signed before a crash) moves money: only with the gate open.
      const gate = await readGate();
      if (!gate.enabled) return waiting(gate.reason ?? "paid_execution_unavailable", GATE_CLOSED_RETRY_MS);
    }
    if (!tx) {
      const submitted = await submit(payment, options);
      if (!("tx_hash" in submitted)) return submitted;
      tx = submitted;
    } else {
      tx = await rebroadcast(tx);
    }
    await markSubmitted(payment, tx);
    const state = await confirmation(tx, config.chainConfirmations);
    if (state.state === "pending") return waiting("awaiting_confirmations", CONFIRMATION_POLL_MS);
    const chain = {
      tx_hash: tx.tx_hash,
      block_number: state.receipt.blockNumber.toString(),
      block_hash: state.receipt.blockHash,
    };
    if (state.state === "reverted") {
      await appendEvidence(
        db(),
        paymentEvidence(payment, {
          state: "confirmation",
          source: "tx_hash",
          source_ref: tx.tx_hash,
          details: { ...chain, receipt_status: "reverted" },
        }),
      );
      return failSettlement(payment, "settlement_transaction_reverted", ["settling", "submitted"], chain);
    }
    if (!transferMatches(payment, state.receipt)) {
      return failSettlement(payment, "no_matching_usdc_transfer", ["settling", "submitted"], chain);
    }
    return finishSettled({ ...payment, status: "submitted" }, tx, state.receipt, state.confirmations);
  } catch (err) {
    logger().warn({ err, payment_id: payment.id }, "x402 settlement check failed on the RPC; retrying later");
    return waiting("settlement_rpc_unreachable", GATE_CLOSED_RETRY_MS);
  }
}
