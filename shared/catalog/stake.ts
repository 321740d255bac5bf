import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { recordAudit } from "../audit/index.js";
import { type Db, db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { daysAfter, wholeDaysSince } from "../kernel/days.js";
import { formatUsdc } from "../kernel/money.js";
import {
  assertCustodyOpen,
  assertPaidExecutionEnabled,
  postBond,
  releaseBond,
  retryTransient,
} from "../money/index.js";
import {
  BOND_MICROS,
  BOND_TERMS,
  DOWNGRADED_BOND_MICROS,
  FREE_LISTING_SLOTS,
  GOOD_STANDING_DAYS,
  MAX_REFUND_RATE_PERCENT,
} from "./bond-terms.js";
import { findAgent, lockAgent } from "./store/sellers.js";
import {
  findLatestStake,
  findOpenStake,
  insertStake,
  liveListingPrices,
  markStakeDowngraded,
  markStakeReleased,
  readStandingFacts,
  type StakeRow,
} from "./store/stakes.js";

// The seller bond (docs/payments.md "Seller bond"). Every change locks the seller's agent row first — the same
// lock publishing takes — so a bond post, downgrade or release and a publish never interleave: two
// concurrent posts make one bond, and a release cannot slip between a publish's check and its insert.

const bondKey = (step: "post" | "downgrade" | "release", stakeId: string) => `ledger:bond_${step}:${stakeId}`;

/** True when the seller has an open (posted or downgraded) bond; call inside the publish transaction. */
export async function hasOpenBond(trx: Knex.Transaction, agentId: string): Promise<boolean> {
  return (await findOpenStake(trx, agentId)) !== undefined;
}

/** Whether a bonded seller is in good standing now, and since when a downgrade is allowed. */
export async function goodStanding(q: Db, stake: StakeRow, now = new Date()) {
  const facts = await readStandingFacts(q, stake.agent_id, GOOD_STANDING_DAYS);
  const eligibleAt = daysAfter(stake.posted_at, GOOD_STANDING_DAYS);
  const refundRatePct = facts.paidCalls === 0 ? 0 : (facts.refundedPaidCalls * 100) / facts.paidCalls;
  const blockers: string[] = [];
  if (facts.failedListingIds.length > 0) blockers.push("live_listing_verification_failed");
  if (facts.refundedPaidCalls * 100 > facts.paidCalls * MAX_REFUND_RATE_PERCENT) {
    blockers.push(`refunded_paid_calls_above_${MAX_REFUND_RATE_PERCENT}_percent`);
  }
  const inGoodStanding = blockers.length === 0;
  if (now < eligibleAt) blockers.push(`bond_younger_than_${GOOD_STANDING_DAYS}_days`);
  return {
    in_good_standing: inGoodStanding,
    window_days: GOOD_STANDING_DAYS,
    bond_age_days: wholeDaysSince(now, stake.posted_at),
    eligible_for_downgrade_at: eligibleAt.toISOString(),
    failed_listing_ids: facts.failedListingIds,
    paid_calls_in_window: facts.paidCalls,
    refunded_paid_calls_in_window: facts.refundedPaidCalls,
    refund_rate_pct: Math.round(refundRatePct * 100) / 100,
    max_refund_rate_pct: MAX_REFUND_RATE_PERCENT,
    blockers,
  };
}

/** Why the bond cannot be released now (empty when it can): paid listings live, or more than the free slot. */
async function releaseBlockers(q: Db, agentId: string) {
  const live = await liveListingPrices(q, agentId);
  const paid = live.filter((l) => BigInt(l.price_micros) > 0n).map((l) => l.id);
  const blockers: string[] = [];
  if (paid.length > 0) blockers.push("paid_listings_live");
  if (live.length > FREE_LISTING_SLOTS) blockers.push("live_listings_beyond_free_slot");
  return { blockers, liveCount: live.length, paidLiveIds: paid };
}

function stakeRecord(s: StakeRow) {
  return {
    stake_id: s.id,
    status: s.status,
    currency: s.currency,
    posted_usdc: formatUsdc(BigInt(s.posted_micros)),
    bonded_usdc: formatUsdc(BigInt(s.bonded_micros)),
    posted_at: s.posted_at.toISOString(),
    downgraded_at: s.downgraded_at?.toISOString() ?? null,
    released_at: s.released_at?.toISOString() ?? null,
    ledger: {
      post_transaction_id: s.post_transaction_id,
      downgrade_transaction_id: s.downgrade_transaction_id,
      release_transaction_id: s.release_transaction_id,
    },
  };
}

/** GET /api/stake: the seller's bond, what it covers, good standing and what it may do next. */
export async function stakeView(agentId: string, q: Db = db()) {
  const open = await findOpenStake(q, agentId);
  const stake = open ?? (await findLatestStake(q, agentId));
  const standing = open ? await goodStanding(q, open) : null;
  const release = await releaseBlockers(q, agentId);
  const downgradeBlockers = !open
    ? ["no_open_bond"]
    : open.status === "downgraded"
      ? ["already_downgraded"]
      : standing!.blockers;
  const releaseBlockerList = open ? release.blockers : ["no_open_bond"];
  return {
    agent_id: agentId,
    bonded: open !== undefined,
    stake: stake ? stakeRecord(stake) : null,
    stake_null_reason: stake ? null : "no_bond_posted",
    live_listings: release.liveCount,
    paid_live_listing_ids: release.paidLiveIds,
    free_concurrent_listing_slots: FREE_LISTING_SLOTS,
    good_standing: standing,
    good_standing_null_reason: standing ? null : "no_open_bond",
    can_post: open === undefined,
    can_downgrade: downgradeBlockers.length === 0,
    downgrade_blockers: downgradeBlockers,
    can_release: releaseBlockerList.length === 0,
    release_blockers: releaseBlockerList,
    terms: BOND_TERMS,
    links: {
      post: "/api/stake",
      downgrade: "/api/stake/downgrade",
      release: "/api/stake/release",
      seller_status: "/api/seller/status",
      wallet: "/api/wallet",
      market: "/market.json",
    },
  };
}

async function requireSeller(agentId: string): Promise<void> {
  const agent = await findAgent(db(), agentId);
  if (agent?.intent === "buyer") {
    throw new AppError(
      "POLICY_BLOCKED",
      "buyer agents have no listings to bond; register as seller or both",
      {
        intent: agent.intent,
      },
    );
  }
}

function bondShortfall(error: AppError): AppError {
  const available = String(error.details?.available_usdc ?? "0.000000");
  return new AppError("PAYMENT_REQUIRED", "your available USDC balance does not cover the seller bond", {
    bond_usdc: formatUsdc(BOND_MICROS),
    available_usdc: available,
    required_usdc: formatUsdc(BOND_MICROS),
    how_to_fund: [
      "link a wallet: POST /api/crypto/connect (or POST /api/crypto/wallet)",
      "ask what to send: POST /api/wallet/purchase {amount_usdc}",
      "send the USDC, then claim it: POST /api/wallet/purchase/verify {tx_hash}",
      "once credited (GET /api/wallet), POST /api/stake again",
    ],
    nothing_recorded: true,
  });
}

/**
 * POST /api/stake: posts the $1 bond from the seller's available USDC (available → bonds). A paid route:
 * 503 while paid execution is off, before anything. Idempotent per seller: with an open bond it returns
 * that bond (created false) and moves nothing; two concurrent posts make one bond. Short funds → 402 with
 * what to do, nothing recorded.
 */
export async function postStake(agentId: string, requestId: string) {
  await assertPaidExecutionEnabled();
  await requireSeller(agentId);
  const { created } = await retryTransient(() =>
    db().transaction(async (trx) => {
      await lockAgent(trx, agentId);
      if (await findOpenStake(trx, agentId)) return { created: false };
      await assertCustodyOpen(trx);
      const id = randomUUID();
      const posted = await postBond(
        {
          agentId,
          currency: "USDC",
          amountMicros: BOND_MICROS,
          reference: { type: "stake", id },
          idempotencyKey: bondKey("post", id),
          metadata: { request_id: requestId },
        },
        trx,
      ).catch((error: unknown) => {
        if (error instanceof AppError && error.code === "PAYMENT_REQUIRED") throw bondShortfall(error);
        throw error;
      });
      await insertStake(trx, {
        id,
        agent_id: agentId,
        amount_micros: BOND_MICROS,
        post_transaction_id: posted.transactionId,
      });
      await recordAudit(trx, {
        actorAgentId: agentId,
        action: "stake.posted",
        subjectType: "stake",
        subjectId: id,
        requestId,
        data: { amount_micros: BOND_MICROS.toString(), ledger_transaction_id: posted.transactionId },
      });
      return { created: true };
    }),
  );
  return { ...(await stakeView(agentId)), replayed: !created };
}

function conflict(message: string, details: Record<string, unknown>): AppError {
  return new AppError("CONFLICT", message, { ...details, read: "GET /api/stake" });
}

/**
 * POST /api/stake/downgrade: after 30 days of good standing, half the bond returns to available and
 * half stays bonded; the seller keeps its bonded status. Downgrading a downgraded bond changes nothing.
 */
export async function downgradeStake(agentId: string, requestId: string) {
  await retryTransient(() =>
    db().transaction(async (trx) => {
      await lockAgent(trx, agentId);
      const open = await findOpenStake(trx, agentId);
      if (!open) throw conflict("there is no open bond to downgrade", { reason: "no_open_bond" });
      if (open.status === "downgraded") return;
      const standing = await goodStanding(trx, open);
      if (standing.blockers.length > 0) {
        throw conflict("the bond cannot be downgraded yet", {
          reason: "not_eligible_for_downgrade",
          blockers: standing.blockers,
          eligible_for_downgrade_at: standing.eligible_for_downgrade_at,
          good_standing: standing,
        });
      }
      const returned = BigInt(open.bonded_micros) - DOWNGRADED_BOND_MICROS;
      const moved = await releaseBond(
        {
          agentId,
          currency: "USDC",
          amountMicros: returned,
          reference: { type: "stake", id: open.id },
          idempotencyKey: bondKey("downgrade", open.id),
          metadata: { request_id: requestId, step: "downgrade" },
        },
        trx,
      );
      await markStakeDowngraded(trx, open.id, DOWNGRADED_BOND_MICROS, moved.transactionId);
      await recordAudit(trx, {
        actorAgentId: agentId,
        action: "stake.downgraded",
        subjectType: "stake",
        subjectId: open.id,
        requestId,
        data: {
          returned_micros: returned.toString(),
          bonded_micros: DOWNGRADED_BOND_MICROS.toString(),
          ledger_transaction_id: moved.transactionId,
          good_standing: standing,
        },
      });
    }),
  );
  return stakeView(agentId);
}

/**
 * POST /api/stake/release: returns whatever is bonded to available, only once no paid listing of the
 * seller is live and no more listings are live than the free slot. Releasing a released bond changes
 * nothing. Works in every availability state: the money stays inside the ledger.
 */
export async function releaseStake(agentId: string, requestId: string) {
  await retryTransient(() =>
    db().transaction(async (trx) => {
      await lockAgent(trx, agentId);
      const open = await findOpenStake(trx, agentId);
      if (!open) {
        if ((await findLatestStake(trx, agentId))?.status === "released") return;
        throw conflict("there is no open bond to release", { reason: "no_open_bond" });
      }
      const { blockers, paidLiveIds, liveCount } = await releaseBlockers(trx, agentId);
      if (blockers.length > 0) {
        throw conflict("the bond cannot be released while it still backs live supply", {
          reason: "bond_still_backs_live_listings",
          blockers,
          paid_live_listing_ids: paidLiveIds,
          live_listings: liveCount,
          free_concurrent_listing_slots: FREE_LISTING_SLOTS,
          what_to_do:
            "retire paid listings (DELETE /api/capabilities/{id}) until none is live and at most the free slot is used",
        });
      }
      const amount = BigInt(open.bonded_micros);
      const moved = await releaseBond(
        {
          agentId,
          currency: "USDC",
          amountMicros: amount,
          reference: { type: "stake", id: open.id },
          idempotencyKey: bondKey("release", open.id),
          metadata: { request_id: requestId, step: "release" },
        },
        trx,
      );
      await markStakeReleased(trx, open.id, moved.transactionId);
      await recordAudit(trx, {
        actorAgentId: agentId,
        action: "stake.released",
        subjectType: "stake",
        subjectId: open.id,
        requestId,
        data: { returned_micros: amount.toString(), ledger_transaction_id: moved.transactionId },
      });
    }),
  );
  return stakeView(agentId);
}
