import type { Hex } from "viem";
import { recordAudit } from "../../audit/index.js";
import { caip2, platformAddress } from "../../chain/client.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError, validationError } from "../../errors.js";
import { isUuid } from "../../kernel/ids.js";
import { formatUsdc, MICROS_PER_USDC, parseUsdc } from "../../kernel/money.js";
import { logger } from "../../log.js";
import { markJobSent } from "../../outbox/index.js";
import { enqueue, getQueue, redriveJob } from "../../queues.js";
import { chainDescriptor, LOCAL_CHAIN_ID } from "../chain-descriptor.js";
import { appendEvidence, listEvidence } from "../evidence/store.js";
import { assertPaidExecutionEnabled } from "../gate/availability.js";
import { findOpenLink } from "../wallets/store.js";
import { confirmDeposit } from "./confirmation.js";
import {
  type DepositRow,
  findAgentDeposit,
  findDeposit,
  findDepositByTx,
  insertDeposit,
  listStaleOpenDeposits,
  reopenNotFoundDeposit,
} from "./store/deposits.js";

// Deposits (docs/payments.md "Deposits"): POST /api/wallet/purchase says exactly what to send, the buyer sends it
// from the linked wallet, POST /api/wallet/purchase/verify {tx_hash} records the claim and queues the
// confirmation, and the settlement-confirmations worker credits it (shared/money/deposits/confirmation.ts).
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

/** Why a pending deposit has no amount yet: the chain has not shown it, or it has not been read. */
function amountNullReason(d: DepositRow): string {
  if (d.status === "rejected") return "no_creditable_transfer";
  if (d.status !== "pending") return "not_recorded";
  return d.waiting_reason === "transaction_not_found_yet" ? "transaction_not_yet_seen" : "chain_not_read_yet";
}

/**
 * The deposit's state in one word and one sentence, from what the chain showed at the last check:
 * not_seen, confirming (k of n), credited (with the ledger transaction), refused (with the reason), or
 * checking (the chain could not be read yet, or custody is closed: waiting_reason says which).
 */
function depositState(d: DepositRow): { state: string; message: string } {
  const k = `${d.confirmations} of ${d.confirmations_required} confirmation(s)`;
  switch (d.status) {
    case "credited":
      return {
        state: "credited",
        message: `Credited to your wallet with ${k} (ledger transaction ${d.ledger_transaction_id}).`,
      };
    case "rejected":
      return {
        state: "refused",
        message: `Not credited: ${d.rejected_reason}. ${REFUSAL_HELP[d.rejected_reason ?? ""] ?? ""}`.trim(),
      };
    case "confirming":
      return d.waiting_reason === "awaiting_confirmations"
        ? {
            state: "confirming",
            message: `Seen on chain with ${k}; credited at ${d.confirmations_required}.`,
          }
        : { state: "checking", message: `Seen on chain with ${k}; waiting: ${d.waiting_reason}.` };
    default:
      return d.waiting_reason === "transaction_not_found_yet"
        ? {
            state: "not_seen",
            message: "The chain has not shown this transaction yet; it is checked again until it appears.",
          }
        : { state: "checking", message: `Not read from the chain yet: ${d.waiting_reason ?? "queued"}.` };
  }
}

const REFUSAL_HELP: Record<string, string> = {
  transaction_not_found: "The chain never showed it in time; verify again once it is mined.",
  transaction_reverted: "The transaction reverted; nothing moved.",
  wrong_token: "It moved another token to the platform; only USDC at token_address is credited.",
  wrong_recipient: "Your USDC went to another address, not to_address.",
  sender_not_linked_wallet: "The USDC came from an address that is not your linked wallet.",
  no_usdc_transfer_to_platform: "It holds no USDC transfer to the platform.",
};

/** A deposit as the API shows it. */
export function depositView(d: DepositRow) {
  const base = getConfig().publicBaseUrl;
  return {
    deposit_id: d.id,
    status: d.status,
    ...depositState(d),
    tx_hash: d.tx_hash,
    chain_id: d.chain_id,
    network: caip2(d.chain_id),
    currency: d.currency,
    from_address: d.sender_address,
    to_address: d.platform_address,
    token_address: d.token_address,
    amount_usdc: d.amount_micros === null ? null : formatUsdc(d.amount_micros),
    amount_atomic: d.amount_micros === null ? null : d.amount_micros.toString(),
    amount_null_reason: d.amount_micros === null ? amountNullReason(d) : null,
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
 * What verify and authorize answer: the deposit, whether this call recorded the claim (`replayed`), and
 * whether it is still open (the route answers 202 with Location then, 200 once final). A transaction
 * credits once, so verifying a credited one again says so.
 */
export function depositAnswer({ deposit, created }: DepositVerification) {
  const view = depositView(deposit);
  const alreadyCredited = !created && deposit.status === "credited";
  return {
    open: isOpen(deposit),
    body: {
      ...view,
      replayed: !created,
      ...(alreadyCredited
        ? { message: `Already credited; a transaction credits once. ${view.message}` }
        : {}),
    },
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

export interface DepositVerification {
  deposit: DepositRow;
  /** True when this call recorded the claim; false when the same agent had submitted it before. */
  created: boolean;
}

/**
 * POST /api/wallet/purchase/verify: records the claim of a transaction (unique per chain and hash) and
 * queues its confirmation. The same agent again gets the same deposit (a deposit rejected only as
 * not-found-in-time is reopened); another agent gets 409 CONFLICT and nothing is recorded for it.
 */
export async function verifyDeposit(
  agentId: string,
  txHash: Hex,
  requestId: string,
): Promise<DepositVerification> {
  await assertPaidExecutionEnabled();
  const link = await findOpenLink(db(), agentId);
  if (!link) throw notLinked();
  const result = await recordDepositClaim(agentId, {
    txHash,
    sender: link.address,
    platform: platformAddress()!,
    requestId,
  });
  if (!isOpen(result.deposit)) return result;
  // Read the chain now, so the answer says what the chain shows (not seen, k of n confirmations,
  // credited, refused) instead of only that the claim was recorded. The same check as the worker's,
  // safe to run beside it; whatever it cannot decide within the wait is left to the queued job.
  const checked = await checkNow(result.deposit);
  if (isOpen(checked)) await queueConfirmation(checked.id, result.created);
  return { ...result, deposit: checked };
}

const isOpen = (d: DepositRow) => d.status === "pending" || d.status === "confirming";

/** One bounded chain check of an open deposit; the deposit as it stands afterwards. */
async function checkNow(deposit: DepositRow): Promise<DepositRow> {
  const waitMs = getConfig().depositVerifyWaitMs;
  if (waitMs === 0) return deposit;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, waitMs);
  });
  await Promise.race([
    confirmDeposit(deposit.id).catch((err: unknown) => {
      logger().warn({ err, deposit_id: deposit.id }, "deposit check at verify failed; the worker retries");
    }),
    timeout,
  ]);
  clearTimeout(timer);
  return (await findDeposit(db(), deposit.id)) ?? deposit;
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
export async function recordDepositClaim(agentId: string, claim: DepositClaim): Promise<DepositVerification> {
  const config = getConfig();
  const hash = claim.txHash.toLowerCase();
  const deadline = new Date(Date.now() + NOT_FOUND_DEADLINE_MS);
  return db().transaction(async (trx): Promise<DepositVerification> => {
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
      const credited = existing.status === "credited";
      throw new AppError(
        "CONFLICT",
        `this transaction was already ${credited ? "credited to" : "submitted by"} another agent`,
        {
          reason: credited ? "tx_hash_already_credited" : "tx_hash_claimed_by_another_agent",
          tx_hash: hash,
          rule: "a transaction credits at most once, to the agent whose linked wallet sent it",
        },
      );
    }
    const reopened = await reopenNotFoundDeposit(trx, existing.id, deadline);
    return { deposit: reopened ?? existing, created: false };
  });
}

/** Deposits untouched this long are checked by the recovery sweep. */
const REDRIVE_AFTER_SECONDS = 30;
const REDRIVE_BATCH = 100;

/**
 * The settlement-confirmations recovery sweep's deposit part: an open deposit whose confirmation job the
 * queue failed for good (its worker killed twice while holding it) or lost is driven again, so a transfer
 * that reached the platform is credited without the payer having to verify again. Returns how many.
 */
export async function redriveDeposits(olderThanSeconds = REDRIVE_AFTER_SECONDS): Promise<number> {
  let redriven = 0;
  for (const id of await listStaleOpenDeposits(db(), olderThanSeconds, REDRIVE_BATCH)) {
    if (await redriveJob("settlement-confirmations", id, { deposit_id: id })) {
      redriven += 1;
      logger().warn({ deposit_id: id }, "deposit confirmation job re-driven");
    }
  }
  return redriven;
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
