import { randomUUID } from "node:crypto";
import { Job } from "bullmq";
import { recordAudit } from "../../audit/index.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { formatUsdc } from "../../kernel/money.js";
import { logger } from "../../log.js";
import { markJobSent } from "../../outbox/index.js";
import { enqueue, getQueue } from "../../queues.js";
import { accountFor, balances, retryTransient } from "../ledger/ledger.js";
import { lockAccounts } from "../ledger/store.js";
import { findOpenLink } from "../wallets/store.js";
import {
  findOpenPayout,
  findRecentFailedPayout,
  insertPayout,
  listSellerPayouts,
  type PayoutRow,
  payoutCandidates,
  staleOpenPayouts,
} from "./store.js";

// Batching sellers' payable USDC into payouts (docs/payments.md "Payouts"). The ledger is not touched here: the
// open payout row is the reservation. It is created under the seller's payable-account lock — the lock
// every capture and every payout confirmation also takes — and at most one payout per seller is open
// (partial unique index), so a concurrent batch cannot pick the same funds, and the amount read is the
// payable balance after every earlier payout was booked. The ledger moves payable → chain clearing only
// when the settlement-confirmations worker confirms the transfer (payout-confirmation.ts).

/** After a payout to an address fails, automatic payouts to that address wait this long. */
export const FAILED_PAYOUT_COOLDOWN_HOURS = 24;
/** Sellers read per page of a sweep. */
const SWEEP_PAGE = 500;
/** An open payout untouched this long has lost its job: the sweep enqueues it again. */
const REDRIVE_AFTER_SECONDS = 120;

/** The payout, as the seller and operators read it. */
export function payoutView(p: PayoutRow) {
  const explorer = getConfig().chainExplorerUrl;
  return {
    payout_id: p.id,
    status: p.status,
    currency: p.currency,
    amount_usdc: formatUsdc(BigInt(p.amount_micros)),
    to_address: p.to_address,
    chain_id: p.chain_id,
    tx_hash: p.tx_hash,
    tx_url: p.tx_hash ? `${explorer}/tx/${p.tx_hash}` : null,
    block_number: p.block_number === null ? null : Number(p.block_number),
    waiting_reason: p.waiting_reason,
    failure_reason: p.failure_reason,
    created_at: p.created_at.toISOString(),
    submitted_at: p.submitted_at?.toISOString() ?? null,
    resolved_at: p.resolved_at?.toISOString() ?? null,
  };
}

/**
 * Creates one payout for a seller when it is due: under the seller's payable-account lock, no open
 * payout, a linked wallet (frozen as to_address), no failed payout to that address in the cooldown, and
 * payable ≥ PAYOUT_THRESHOLD_USDC. The whole payable balance is paid. Returns undefined when not due.
 */
export async function createPayoutFor(sellerId: string, batchId: string): Promise<PayoutRow | undefined> {
  const config = getConfig();
  const payout = await retryTransient(() =>
    db().transaction(async (trx) => {
      const account = await accountFor(sellerId, "seller_payable", "USDC", trx);
      const [locked] = await lockAccounts(trx, [account.id]);
      if (await findOpenPayout(trx, sellerId)) return undefined;
      const link = await findOpenLink(trx, sellerId);
      if (!link) return undefined;
      if (await findRecentFailedPayout(trx, sellerId, link.address, FAILED_PAYOUT_COOLDOWN_HOURS)) {
        return undefined;
      }
      const amount = locked!.balance_micros;
      if (amount < config.payoutThresholdMicros) return undefined;
      const row = await insertPayout(trx, {
        seller_id: sellerId,
        amount_micros: amount,
        chain_id: config.chainId,
        to_address: link.address,
        batch_id: batchId,
      });
      await recordAudit(trx, {
        action: "payout.created",
        subjectType: "payout",
        subjectId: row.id,
        data: {
          seller_id: sellerId,
          amount_micros: amount.toString(),
          to_address: link.address,
          batch_id: batchId,
        },
      });
      return row;
    }),
  );
  if (payout) await enqueuePayoutJob("payouts", payout.id);
  return payout;
}

/** Sends a payout's job after its commit; if Redis fails, the outbox sweeper or the next sweep sends it. */
export async function enqueuePayoutJob(
  queue: "payouts" | "settlement-confirmations",
  payoutId: string,
): Promise<void> {
  try {
    await enqueue(queue, payoutId, { payout_id: payoutId });
    markJobSent(queue, payoutId);
  } catch (err) {
    logger().warn({ err, payout_id: payoutId, queue }, "payout enqueue failed; a sweep will send it");
  }
}

/** Re-sends the job of an open payout nobody touched for a while (lost enqueue, or a job BullMQ gave up on). */
async function redrive(p: PayoutRow): Promise<void> {
  const queue = p.status === "pending" ? "payouts" : "settlement-confirmations";
  const job = await Job.fromId(getQueue(queue), p.id);
  if (job && (await job.isFailed())) await job.retry("failed");
  else if (!job) await enqueuePayoutJob(queue, p.id);
}

/**
 * One batch (the payout-sweep job): a payout for every seller whose payable USDC reached the threshold
 * and who has a linked wallet; sellers without one accrue. Then re-drives open payouts left untouched.
 * Returns how many payouts it created.
 */
export async function processPayoutSweep(batchId: string = randomUUID()): Promise<number> {
  const threshold = getConfig().payoutThresholdMicros;
  let after: string | null = null;
  let created = 0;
  for (;;) {
    const sellers = await payoutCandidates(db(), threshold, after, SWEEP_PAGE);
    for (const sellerId of sellers) {
      if (await createPayoutFor(sellerId, batchId)) created++;
    }
    if (sellers.length < SWEEP_PAGE) break;
    after = sellers[sellers.length - 1]!;
  }
  for (const stale of await staleOpenPayouts(db(), REDRIVE_AFTER_SECONDS, SWEEP_PAGE)) {
    await redrive(stale).catch((err) =>
      logger().warn({ err, payout_id: stale.id }, "could not re-drive an open payout"),
    );
  }
  if (created > 0) logger().info({ batch_id: batchId, created }, "payout batch created");
  return created;
}

const RECENT_PAYOUTS_SHOWN = 5;

/** Where a seller's payouts stand: payable, the open payout, recent ones, and why money is accruing. */
export async function payoutSummary(agentId: string) {
  const q = db();
  const config = getConfig();
  const [usdc, link, open, recent] = await Promise.all([
    balances(agentId, "USDC"),
    findOpenLink(q, agentId),
    findOpenPayout(q, agentId),
    listSellerPayouts(q, agentId, RECENT_PAYOUTS_SHOWN),
  ]);
  const failed = link
    ? await findRecentFailedPayout(q, agentId, link.address, FAILED_PAYOUT_COOLDOWN_HOURS)
    : undefined;
  const inFlight = open ? BigInt(open.amount_micros) : 0n;
  const [state, note] = open
    ? ["payout_in_flight", "a payout is on its way; new earnings wait for the next batch after it confirms"]
    : !link
      ? [
          "accruing_no_linked_wallet",
          "earnings accrue in seller payable: link a wallet (POST /api/crypto/connect) to receive payouts",
        ]
      : failed
        ? [
            "paused_after_failed_payout",
            `the last payout to this wallet failed; automatic payouts to it resume ${FAILED_PAYOUT_COOLDOWN_HOURS} h after, or link another wallet`,
          ]
        : usdc.payable < config.payoutThresholdMicros
          ? ["accruing_below_threshold", "earnings accrue until seller payable reaches the payout threshold"]
          : ["due_at_next_batch", "seller payable has reached the threshold: the next payout batch pays it"];
  return {
    currency: "USDC" as const,
    state,
    note,
    payable_usdc: formatUsdc(usdc.payable),
    in_flight_usdc: formatUsdc(inFlight),
    threshold_usdc: formatUsdc(config.payoutThresholdMicros),
    linked_wallet: link?.address ?? null,
    linked_wallet_null_reason: link ? null : "no_wallet_linked",
    batch_interval_ms: config.payoutSweepIntervalMs,
    open_payout: open ? payoutView(open) : null,
    recent_payouts: recent.map(payoutView),
  };
}
