import type { Hex } from "viem";
import { caip2, platformAddress } from "../chain/client.js";
import { getConfig } from "../config.js";
import { recordAudit } from "../db/audit.js";
import {
  type DepositRow,
  findAgentDeposit,
  findDepositByTx,
  insertDeposit,
  reopenNotFoundDeposit,
} from "../db/deposits.js";
import { appendEvidence, listEvidence } from "../db/evidence.js";
import { db } from "../db/knex.js";
import { findOpenLink } from "../db/wallets.js";
import { AppError, validationError } from "../errors.js";
import { logger } from "../log.js";
import { enqueue, getQueue } from "../queues.js";
import { assertPaidExecutionEnabled } from "./availability.js";
import { chainDescriptor, LOCAL_CHAIN_ID } from "./chain-descriptor.js";
import { isUuid } from "./ids.js";
import { formatUsdc, MICROS_PER_USDC, parseUsdc } from "./money.js";
import { markJobSent } from "./outbox.js";

// Deposits (README "Deposits"): POST /api/wallet/purchase says exactly what to send, the buyer sends it
// from the linked wallet, POST /api/wallet/purchase/verify {tx_hash} records the claim and queues the
// confirmation, and the settlement-confirmations worker credits it (shared/domain/deposit-confirmation.ts).
// A gasless deposit (deposit-authorization.ts) is the platform's own transaction, claimed the same way.

/** Smallest amount a purchase request asks for (smaller transfers that arrive are still credited). */
export const MIN_PURCHASE_MICROS = 10_000n;
/** Largest amount one purchase request asks for. */
export const MAX_PURCHASE_MICROS = 1_000_000n * MICROS_PER_USDC;
/** A transaction hash the chain has not shown within this time is rejected (transaction_not_found). */
export const NOT_FOUND_DEADLINE_MS = 30 * 60_000;

function notLinked(): AppError {
  return new AppError("WALLET_NOT_LINKED", "link the wallet you will pay from before depositing", {
    reason: "no_linked_wallet",
    link_with_signature: "POST /api/crypto/connect {wallet_address}, then sign the returned challenge",
    or_generate: "POST /api/crypto/wallet (self-custody key, shown once)",
    why: "deposits are credited only from the agent's linked wallet, so a transfer is attributable to one agent",
  });
}

function explorerTx(hash: string): string | null {
  const config = getConfig();
  return config.chainId === LOCAL_CHAIN_ID ? null : `${config.chainExplorerUrl}/tx/${hash}`;
}

const AMOUNT_NULL_REASON: Record<string, string> = {
  pending: "transaction_not_yet_seen",
  rejected: "no_creditable_transfer",
};

/** A deposit as the API shows it. */
export function depositView(d: DepositRow) {
  const base = getConfig().publicBaseUrl;
  return {
    deposit_id: d.id,
    status: d.status,
    tx_hash: d.tx_hash,
    chain_id: d.chain_id,
    network: caip2(d.chain_id),
    currency: d.currency,
    from_address: d.sender_address,
    to_address: d.platform_address,
    token_address: d.token_address,
    amount_usdc: d.amount_micros === null ? null : formatUsdc(d.amount_micros),
    amount_atomic: d.amount_micros === null ? null : d.amount_micros.toString(),
    amount_null_reason: d.amount_micros === null ? (AMOUNT_NULL_REASON[d.status] ?? "not_recorded") : null,
    confirmations: { seen: d.confirmations, required: d.confirmations_required },
    block_number: d.block_number === null ? null : Number(d.block_number),
    waiting_reason: d.status === "pending" || d.status === "confirming" ? d.waiting_reason : null,
    rejected_reason: d.rejected_reason,
    ledger_transaction_id: d.ledger_transaction_id,
    explorer_url: explorerTx(d.tx_hash),
    created_at: d.created_at.toISOString(),
    updated_at: d.updated_at.toISOString(),
    resolved_at: d.resolved_at?.toISOString() ?? null,
    status_url: `${base}/api/wallet/deposits/${d.id}`,
  };
}

/**
 * POST /api/wallet/purchase: the exact transfer that funds the wallet. Refused with 503 while paid
 * execution is off (before anything else), and with WALLET_NOT_LINKED until a wallet is linked.
 */
export async function purchaseInstructions(agentId: string, amountUsdc: string | number) {
  await assertPaidExecutionEnabled();
  const amountMicros = parseUsdc(amountUsdc, "/amount_usdc");
  if (amountMicros < MIN_PURCHASE_MICROS || amountMicros > MAX_PURCHASE_MICROS) {
    throw validationError("purchase amount out of range", [
      {
        path: "/amount_usdc",
        message: `must be between ${formatUsdc(MIN_PURCHASE_MICROS)} and ${formatUsdc(MAX_PURCHASE_MICROS)}`,
      },
    ]);
  }
  const link = await findOpenLink(db(), agentId);
  if (!link) throw notLinked();
  const config = getConfig();
  const to = platformAddress()!;
  const base = config.publicBaseUrl;
  return {
    purchase: "deposit_request" as const,
    status: "awaiting_transfer" as const,
    amount_usdc: formatUsdc(amountMicros),
    amount_atomic: amountMicros.toString(),
    currency: "USDC" as const,
    decimals: 6,
    transfer: {
      network: caip2(config.chainId),
      chain_id: config.chainId,
      token_address: config.usdcAddress,
      from_address: link.address,
      to_address: to,
      method: "ERC-20 transfer(to_address, amount_atomic) on token_address, sent from from_address",
      eip681_uri: `ethereum:${config.usdcAddress}@${config.chainId}/transfer?address=${to}&uint256=${amountMicros}`,
    },
    confirmations_required: config.chainConfirmations,
    rules: [
      "Send from the linked wallet (from_address): a transfer from any other address is rejected and not credited.",
      "What is credited is the USDC that arrives from the linked wallet in that transaction (it may differ from amount_usdc).",
      `The deposit is credited once it has ${config.chainConfirmations} confirmation(s); a transaction hash credits at most once.`,
      "Only USDC at token_address counts; ETH or other tokens sent to the platform are not credited.",
    ],
    next: {
      method: "POST" as const,
      path: "/api/wallet/purchase/verify",
      url: `${base}/api/wallet/purchase/verify`,
      body: { tx_hash: "0x… (the hash of your transfer)" },
    },
    chain: await chainDescriptor(),
  };
}

export interface VerifyResult {
  deposit: DepositRow;
  /** True when this call recorded the claim; false when the same agent had submitted it before. */
  created: boolean;
}

/**
 * POST /api/wallet/purchase/verify: records the claim of a transaction (unique per chain and hash) and
 * queues its confirmation. The same agent again gets the same deposit (a deposit rejected only as
 * not-found-in-time is reopened); another agent gets 409 CONFLICT and nothing is recorded for it.
 */
export async function verifyDeposit(agentId: string, txHash: Hex, requestId: string): Promise<VerifyResult> {
  await assertPaidExecutionEnabled();
  const link = await findOpenLink(db(), agentId);
  if (!link) throw notLinked();
  const result = await recordDepositClaim(agentId, {
    txHash,
    sender: link.address,
    platform: platformAddress()!,
    requestId,
  });
  const { deposit } = result;
  if (deposit.status === "pending" || deposit.status === "confirming") {
    await queueConfirmation(deposit.id, result.created);
  }
  return result;
}

/** What a deposit is checked against, frozen when it is claimed. */
export interface DepositClaim {
  txHash: Hex;
  /** The address the USDC must come from: the agent's linked wallet. */
  sender: string;
  platform: string;
  requestId: string;
  /** A gasless deposit: the EIP-3009 authorization the platform submitted, kept as evidence. */
  authorization?: { depositRequestId: string; amountMicros: bigint; details: Record<string, unknown> };
}

/**
 * Records the claim of a transaction in one transaction: the deposit (unique per chain and hash) with
 * its outbox job, the audit event and, for a gasless deposit, its authorization evidence. The same
 * agent again gets the same deposit (reopened if it was rejected only as not found in time); another
 * agent's claim of the same hash is 409 CONFLICT. The caller queues the confirmation.
 */
export async function recordDepositClaim(agentId: string, claim: DepositClaim): Promise<VerifyResult> {
  const config = getConfig();
  const hash = claim.txHash.toLowerCase();
  const deadline = new Date(Date.now() + NOT_FOUND_DEADLINE_MS);
  return db().transaction(async (trx): Promise<VerifyResult> => {
    const inserted = await insertDeposit(trx, {
      agent_id: agentId,
      chain_id: config.chainId,
      tx_hash: hash,
      sender_address: claim.sender,
      platform_address: claim.platform,
      token_address: config.usdcAddress,
      confirmations_required: config.chainConfirmations,
      request_id: claim.requestId,
      not_found_deadline_at: deadline,
    });
    if (inserted) {
      await recordAudit(trx, {
        actorAgentId: agentId,
        action: "deposit.claimed",
        subjectType: "deposit",
        subjectId: inserted.id,
        requestId: claim.requestId,
        data: {
          chain_id: config.chainId,
          tx_hash: hash,
          sender_address: claim.sender,
          method: claim.authorization ? "authorization" : "transfer",
          ...(claim.authorization ? { deposit_request_id: claim.authorization.depositRequestId } : {}),
        },
      });
      if (claim.authorization) {
        await appendEvidence(trx, {
          agent_id: agentId,
          subject_type: "deposit",
          subject_id: inserted.id,
          state: "authorization",
          source: "eip3009_signature",
          source_ref: claim.authorization.depositRequestId,
          amount_micros: claim.authorization.amountMicros,
          currency: "USDC",
          details: { ...claim.authorization.details, tx_hash: hash },
        });
      }
      return { deposit: inserted, created: true };
    }
    const existing = (await findDepositByTx(trx, config.chainId, hash))!;
    if (existing.agent_id !== agentId) {
      throw new AppError("CONFLICT", "this transaction was already submitted by another agent", {
        reason: "tx_hash_claimed_by_another_agent",
        tx_hash: hash,
        rule: "a transaction credits at most once, to the agent whose linked wallet sent it",
      });
    }
    const reopened = await reopenNotFoundDeposit(trx, existing.id, deadline);
    return { deposit: reopened ?? existing, created: false };
  });
}

/**
 * Makes sure a confirmation job exists for an open deposit. A fresh claim is added directly (its outbox
 * row covers a failed add); an existing claim re-drives a finished job (a reopened deposit) or adds one
 * that is gone. A failure is logged, not raised: the claim is recorded and verify can be called again.
 */
export async function queueConfirmation(depositId: string, fresh: boolean): Promise<void> {
  try {
    const job = fresh ? undefined : await getQueue("settlement-confirmations").getJob(depositId);
    if (!job) {
      await enqueue("settlement-confirmations", depositId, { deposit_id: depositId });
    } else {
      const state = await job.getState();
      if (state === "completed" || state === "failed") await job.retry(state);
    }
    markJobSent("settlement-confirmations", depositId);
  } catch (err) {
    logger().warn(
      { err, deposit_id: depositId },
      "deposit confirmation not queued; the sweeper will send it",
    );
  }
}

/** GET /api/wallet/deposits/{id}: the agent's deposit with its evidence; another agent's is 404. */
export async function depositStatus(agentId: string, depositId: string) {
  const deposit = isUuid(depositId) ? await findAgentDeposit(db(), agentId, depositId) : undefined;
  if (!deposit) throw new AppError("NOT_FOUND", "no such deposit");
  const evidence = await listEvidence(db(), "deposit", deposit.id);
  return {
    ...depositView(deposit),
    evidence: evidence.map((e) => ({
      state: e.state,
      source: e.source,
      source_ref: e.source_ref,
      amount_usdc: e.amount_micros === null ? null : formatUsdc(BigInt(e.amount_micros)),
      details: e.details,
      recorded_at: e.created_at.toISOString(),
    })),
  };
}
