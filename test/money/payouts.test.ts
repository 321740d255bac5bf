import { randomUUID } from "node:crypto";
import type { Worker } from "bullmq";
import { type Address, getAddress, type PrivateKeyAccount } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EIP3009_ABI, ERC20_ABI } from "../../shared/chain/client.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { captureHold, creditDeposit, holdFunds } from "../../shared/money/ledger/flows.js";
import { balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import { confirmPayout } from "../../shared/money/payouts/confirmation.js";
import { processPayoutSweep } from "../../shared/money/payouts/payouts.js";
import { processPayout } from "../../shared/money/payouts/submission.js";
import { getQueue } from "../../shared/queues.js";
import { PAYOUT_SWEEP_SCHEDULER_ID, schedulePayoutSweep, startPayoutsWorker } from "../../workers/payouts.js";
import {
  processSettlementConfirmation,
  startSettlementConfirmationsWorker,
} from "../../workers/settlement-confirmations.js";
import {
  type LocalChain,
  localWalletClient,
  signTransferAuthorization,
  startLocalChain,
} from "../helpers/chain.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { holdOf } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { waitFor } from "../helpers/processes.js";
import { startService, type TestService } from "../helpers/service.js";
import { linkWalletDirect } from "../helpers/wallets.js";

// Seller payouts on a local chain (docs/payments.md "Payouts"): batching above the threshold, submission through
// durable-tx, confirmation by the settlement-confirmations worker, the ledger only on confirmation,
// concurrency, a frozen custody switch and a reverted transfer. A database of its own: it freezes
// custody and reads the platform's chain-clearing balance.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platform: PrivateKeyAccount;
let service: TestService;

const USDC = (n: number) => BigInt(Math.round(n * 1_000_000));

beforeAll(async () => {
  ownDb = await useOwnDatabase("payouts");
  chain = await startLocalChain();
  platform = await usePaidChain(chain, { confirmations: 2 });
  overrideConfig({ payoutThresholdMicros: USDC(10) });
  await chain.mint(platform.address, USDC(1000));
  service = await startService({ worker: false, sweeper: false });
});

afterAll(async () => {
  for (const queue of ["payouts", "settlement-confirmations"] as const) {
    await getQueue(queue)
      .obliterate({ force: true })
      .catch(() => {});
  }
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

/** Seller payable of `grossUsdc` worth of paid calls (the seller gets 97 %), through hold and capture. */
async function accrue(seller: TestAgent, grossUsdc: number): Promise<bigint> {
  const buyer = await buildAgent("buyer");
  const id = randomUUID();
  const amount = USDC(grossUsdc);
  await creditDeposit({
    agentId: buyer.agentId,
    currency: "USDC",
    amountMicros: amount,
    reference: { type: "test", id },
    idempotencyKey: `test:deposit:${id}`,
  });
  const hold = {
    agentId: buyer.agentId,
    currency: "USDC" as const,
    amountMicros: amount,
    reference: { type: "invocation", id },
    idempotencyKey: `test:hold:${id}`,
  };
  await holdFunds(hold);
  const capture = await captureHold({
    ...holdOf(hold),
    idempotencyKey: `test:capture:${id}`,
    sellerAgentId: seller.agentId,
  });
  return capture.sellerMicros;
}

/** Links a fresh wallet address to the agent (replacing its link), as POST /api/crypto/connect does. */
async function linkNewWallet(agent: TestAgent): Promise<Address> {
  const { address } = await chain.newWallet({ eth: 0n });
  await linkWalletDirect(agent.agentId, address);
  return address;
}

async function dueSeller(grossUsdc = 11): Promise<{ seller: TestAgent; wallet: Address; payable: bigint }> {
  const seller = await buildAgent("seller");
  const wallet = await linkNewWallet(seller);
  const payable = await accrue(seller, grossUsdc);
  return { seller, wallet, payable };
}

const tokenBalance = (address: Address) =>
  chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "balanceOf",
    args: [address],
  }) as Promise<bigint>;

const payoutsOf = (seller: TestAgent) =>
  db()("payouts").where({ seller_id: seller.agentId }).orderBy("created_at");
const payoutTxs = (payoutId: string) =>
  db()("chain_transactions").where({ purpose: "payout", subject_id: payoutId });
const evidenceStates = async (payoutId: string) =>
  db()("payment_evidence")
    .where({ subject_type: "payout", subject_id: payoutId })
    .pluck("state")
    .then((states: string[]) => states.sort());
const clearing = async () => (await platformAccount("chain_clearing", "USDC")).balance_micros;
const payoutLedger = (seller: TestAgent) =>
  db()("ledger_transactions")
    .where({ kind: "payout", reference_type: "payout" })
    .whereIn(
      "reference_id",
      db()("payouts").where({ seller_id: seller.agentId }).select(db().raw("id::text")),
    );

async function setCustody(frozen: boolean): Promise<void> {
  await db()("platform_settings")
    .where({ key: "custody" })
    .update({ value: JSON.stringify({ frozen, reason: frozen ? "test_freeze" : null }) });
}

describe("the payout batch", () => {
  it("pays a seller at or above the threshold once per batch; without a wallet or below it, earnings accrue", async () => {
    const due = await dueSeller(11);
    const noWallet = await buildAgent("seller");
    await accrue(noWallet, 30);
    const small = await buildAgent("seller");
    await linkNewWallet(small);
    await accrue(small, 5);

    await processPayoutSweep();
    const [payout] = await payoutsOf(due.seller);
    expect(payout).toMatchObject({
      status: "pending",
      amount_micros: due.payable.toString(),
      to_address: due.wallet,
      currency: "USDC",
    });
    expect(await payoutsOf(noWallet)).toHaveLength(0);
    expect(await payoutsOf(small)).toHaveLength(0);
    // The ledger is untouched until confirmation: the open payout row is the reservation.
    expect((await balances(due.seller.agentId, "USDC")).payable).toBe(due.payable);
    expect(await payoutLedger(due.seller)).toHaveLength(0);
    // A second batch cannot pick the same funds.
    await processPayoutSweep();
    expect(await payoutsOf(due.seller)).toHaveLength(1);

    const status = (await api("GET", "/api/seller/status", { key: noWallet.apiKey })).body.payouts;
    expect(status).toMatchObject({
      state: "accruing_no_linked_wallet",
      payable_usdc: "29.100000",
      linked_wallet: null,
      linked_wallet_null_reason: "no_wallet_linked",
      open_payout: null,
    });
    const wallet = (await api("GET", "/api/wallet", { key: noWallet.apiKey })).body.payouts;
    expect(wallet.state).toBe("accruing_no_linked_wallet");
    expect((await api("GET", "/api/wallet", { key: small.apiKey })).body.payouts.state).toBe(
      "accruing_below_threshold",
    );
    const inFlight = (await api("GET", "/api/seller/status", { key: due.seller.apiKey })).body.payouts;
    expect(inFlight).toMatchObject({ state: "payout_in_flight", in_flight_usdc: "10.670000" });
    expect(inFlight.open_payout.payout_id).toBe(payout.id);
  });

  it("five concurrent batches make one payout for a seller", async () => {
    const due = await dueSeller(20);
    const created = await Promise.all(Array.from({ length: 5 }, () => processPayoutSweep()));
    expect(created.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
    expect(await payoutsOf(due.seller)).toHaveLength(1);
  });

  it("submits once, confirms after CHAIN_CONFIRMATIONS, and moves payable → chain clearing only then", async () => {
    const due = await dueSeller(12);
    await processPayoutSweep();
    const [payout] = await payoutsOf(due.seller);

    const runs = await Promise.all([
      processPayout(payout.id),
      processPayout(payout.id),
      processPayout(payout.id),
    ]);
    expect(new Set(runs.map((r) => (r.status === "submitted" ? r.txHash : r.status))).size).toBe(1);
    expect(await payoutTxs(payout.id)).toHaveLength(1);
    expect(await tokenBalance(due.wallet)).toBe(due.payable);
    const submitted = (await payoutsOf(due.seller))[0];
    expect(submitted.status).toBe("submitted");
    expect(runs).toEqual(Array(3).fill({ status: "submitted", txHash: submitted.tx_hash }));
    expect(await evidenceStates(payout.id)).toEqual(["settlement"]);

    const clearingBefore = await clearing();
    // One block so far (the transfer's own); two are required.
    expect(await processSettlementConfirmation({ payout_id: payout.id })).toMatchObject({
      status: "waiting",
      reason: "awaiting_confirmations",
    });
    expect((await balances(due.seller.agentId, "USDC")).payable).toBe(due.payable);
    expect(await clearing()).toBe(clearingBefore);

    await chain.mine(1);
    const [a, b] = await Promise.all([confirmPayout(payout.id), confirmPayout(payout.id)]);
    expect([a.status, b.status].sort()).toEqual(["already_final", "confirmed"]);
    expect((await balances(due.seller.agentId, "USDC")).payable).toBe(0n);
    expect(await clearing()).toBe(clearingBefore + due.payable);
    expect(await payoutLedger(due.seller)).toHaveLength(1);
    expect(await evidenceStates(payout.id)).toEqual(["confirmation", "payout", "settlement"]);
    const payoutEvidence = await db()("payment_evidence")
      .where({ subject_type: "payout", subject_id: payout.id, state: "payout" })
      .first();
    expect(payoutEvidence).toMatchObject({ source: "tx_hash", source_ref: submitted.tx_hash });
    expect(payoutEvidence.details.block_number).toBeGreaterThan(0);
    expect(
      await db()("audit_events")
        .where({ subject_type: "payout", subject_id: payout.id })
        .orderBy("id")
        .pluck("action"),
    ).toEqual(["payout.created", "payout.submitted", "payout.confirmed"]);

    expect(await processPayout(payout.id)).toEqual({ status: "already_final", final: "confirmed" });
    expect(await confirmPayout(payout.id)).toEqual({ status: "already_final", final: "confirmed" });
    expect(await tokenBalance(due.wallet)).toBe(due.payable);
    const view = (await api("GET", "/api/seller/status", { key: due.seller.apiKey })).body.payouts;
    expect(view).toMatchObject({ state: "accruing_below_threshold", payable_usdc: "0.000000" });
    expect(view.recent_payouts[0]).toMatchObject({ status: "confirmed", tx_hash: submitted.tx_hash });
  });

  it("the workers carry a payout from the batch job to confirmed", async () => {
    const due = await dueSeller(15);
    const workers: Worker[] = [startPayoutsWorker(), startSettlementConfirmationsWorker()];
    const miner = setInterval(() => chain.mine(1).catch(() => {}), 300);
    try {
      await getQueue("payouts").add("sweep", { sweep: true });
      const done = await waitFor("the payout to confirm", async () => {
        const [p] = await payoutsOf(due.seller);
        return p?.status === "confirmed" && p;
      });
      expect(done.amount_micros).toBe(due.payable.toString());
      expect(await tokenBalance(due.wallet)).toBe(due.payable);
      expect((await balances(due.seller.agentId, "USDC")).payable).toBe(0n);
    } finally {
      clearInterval(miner);
      await Promise.all(workers.map((w) => w.close()));
    }
  });
});

describe("custody frozen", () => {
  it("sends nothing while frozen and pays once after the unfreeze", async () => {
    const due = await dueSeller(11);
    await setCustody(true);
    try {
      await processPayoutSweep();
      const [payout] = await payoutsOf(due.seller);
      expect(await processPayout(payout.id)).toMatchObject({
        status: "waiting",
        reason: "platform_custody_frozen",
      });
      expect(await payoutTxs(payout.id)).toHaveLength(0);
      expect((await payoutsOf(due.seller))[0].waiting_reason).toBe("platform_custody_frozen");
    } finally {
      await setCustody(false);
    }
    const [payout] = await payoutsOf(due.seller);
    expect(await processPayout(payout.id)).toMatchObject({ status: "submitted" });
    expect(await tokenBalance(due.wallet)).toBe(due.payable);
  });

  it("a freeze between signing and broadcasting holds the signed transfer; the unfreeze sends those bytes once", async () => {
    const due = await dueSeller(11);
    await processPayoutSweep();
    const [payout] = await payoutsOf(due.seller);
    try {
      const outcome = await processPayout(payout.id, { beforeBroadcast: () => setCustody(true) });
      expect(outcome).toMatchObject({ status: "waiting", reason: "platform_custody_frozen" });
      const [signed] = await payoutTxs(payout.id);
      expect(signed.status).toBe("signed");
      expect(await tokenBalance(due.wallet)).toBe(0n);
      expect(await processPayout(payout.id)).toMatchObject({ status: "waiting" });
      expect((await payoutTxs(payout.id))[0].status).toBe("signed");
    } finally {
      await setCustody(false);
    }
    const sent = await processPayout(payout.id);
    const rows = await payoutTxs(payout.id);
    expect(rows).toHaveLength(1);
    expect(sent).toEqual({ status: "submitted", txHash: rows[0].tx_hash });
    expect(await tokenBalance(due.wallet)).toBe(due.payable);
  });
});

/** Moves the platform's whole USDC balance away without using its nonce (EIP-3009, submitted by another wallet). */
async function drainPlatform(sink: Address): Promise<bigint> {
  const amount = await tokenBalance(platform.address);
  const { authorization: a, signature } = await signTransferAuthorization({
    account: platform,
    token: { address: getAddress(chain.tokenAddress), chainId: chain.chainId },
    to: sink,
    valueMicros: amount,
  });
  const relayer = await chain.newWallet();
  const hash = await localWalletClient(chain, relayer.account).writeContract({
    address: chain.tokenAddress,
    abi: EIP3009_ABI,
    functionName: "transferWithAuthorization",
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
  });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  return amount;
}

describe("a reverted payout", () => {
  it("fails, returns the amount to payable, pauses that address, and pays a newly linked wallet", async () => {
    const due = await dueSeller(13);
    await processPayoutSweep();
    const [payout] = await payoutsOf(due.seller);
    const sink = (await chain.newWallet()).address;
    // The transfer was estimated and signed while the hot wallet held enough; it is mined after it is empty.
    const drained = { amount: 0n };
    const sent = await processPayout(payout.id, {
      beforeBroadcast: async () => {
        drained.amount = await drainPlatform(sink);
      },
    });
    expect(sent.status).toBe("submitted");
    await chain.mine(1);
    expect(await confirmPayout(payout.id)).toEqual({ status: "failed", reason: "transaction_reverted" });

    const [failed] = await payoutsOf(due.seller);
    expect(failed).toMatchObject({ status: "failed", failure_reason: "transaction_reverted" });
    expect(await tokenBalance(due.wallet)).toBe(0n);
    expect((await balances(due.seller.agentId, "USDC")).payable).toBe(due.payable);
    expect(await payoutLedger(due.seller)).toHaveLength(0);
    expect(await evidenceStates(payout.id)).toEqual(["outcome", "settlement"]);
    expect(await confirmPayout(payout.id)).toEqual({ status: "already_final", final: "failed" });

    // Refill the hot wallet. The same address is not retried at once (cooldown): the status says so.
    await chain.mint(platform.address, drained.amount);
    await processPayoutSweep();
    expect(await payoutsOf(due.seller)).toHaveLength(1);
    const view = (await api("GET", "/api/seller/status", { key: due.seller.apiKey })).body.payouts;
    expect(view.state).toBe("paused_after_failed_payout");

    // A newly linked wallet is paid at the next batch, the whole payable, once.
    const newWallet = await linkNewWallet(due.seller);
    await processPayoutSweep();
    const all = await payoutsOf(due.seller);
    expect(all).toHaveLength(2);
    expect(all[1]).toMatchObject({
      status: "pending",
      to_address: newWallet,
      amount_micros: due.payable.toString(),
    });
    expect(await processPayout(all[1].id)).toMatchObject({ status: "submitted" });
    await chain.mine(1);
    expect(await confirmPayout(all[1].id)).toMatchObject({ status: "confirmed" });
    expect(await tokenBalance(newWallet)).toBe(due.payable);
    expect((await balances(due.seller.agentId, "USDC")).payable).toBe(0n);
  });
});

describe("the payout-sweep scheduler", () => {
  it("is upserted when PAYOUT_SWEEP_INTERVAL_MS is set and removed when it is 0", async () => {
    const queue = getQueue("payouts");
    overrideConfig({ payoutSweepIntervalMs: 3_600_000 });
    try {
      expect(await schedulePayoutSweep()).toBe("scheduled");
      const schedulers = await queue.getJobSchedulers();
      expect(schedulers.map((s) => s.key)).toContain(PAYOUT_SWEEP_SCHEDULER_ID);
    } finally {
      overrideConfig({ payoutSweepIntervalMs: 0 });
    }
    expect(await schedulePayoutSweep()).toBe("disabled");
    expect((await queue.getJobSchedulers()).map((s) => s.key)).not.toContain(PAYOUT_SWEEP_SCHEDULER_ID);
    expect(getConfig().payoutThresholdMicros).toBe(USDC(10));
  });
});
