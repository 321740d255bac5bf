import { randomBytes, randomUUID } from "node:crypto";
import { type Address, getAddress, type PrivateKeyAccount } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EIP3009_ABI, ERC20_ABI } from "../../shared/chain/client.js";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { captureHold, creditDeposit, holdFunds } from "../../shared/money/ledger/flows.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { confirmPayout } from "../../shared/money/payouts/confirmation.js";
import { processPayoutSweep } from "../../shared/money/payouts/payouts.js";
import { processPayout } from "../../shared/money/payouts/submission.js";
import { getQueue } from "../../shared/queues.js";
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
import { startService, type TestService } from "../helpers/service.js";
import { linkWalletDirect } from "../helpers/wallets.js";

// The money console (docs/operations.md "Money console"): failed payouts listed with their evidence;
// a retry, sent many times at once, makes one new payout and one on-chain transfer; every action has
// its audit row. A database of its own: it lists every failed payout.

const ADMIN_KEY = `admin-${randomBytes(24).toString("hex")}`;
const USDC = (n: number) => BigInt(Math.round(n * 1_000_000));

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platform: PrivateKeyAccount;
let service: TestService;

beforeAll(async () => {
  ownDb = await useOwnDatabase("moneyconsole");
  chain = await startLocalChain();
  platform = await usePaidChain(chain, { confirmations: 1 });
  overrideConfig({ payoutThresholdMicros: USDC(10), adminApiKey: ADMIN_KEY });
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

const tokenBalance = (address: Address) =>
  chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "balanceOf",
    args: [address],
  }) as Promise<bigint>;

/** Seller payable from a captured paid call of `grossUsdc`. */
async function accrue(seller: TestAgent, grossUsdc: number): Promise<bigint> {
  const buyer = await buildAgent("buyer");
  const id = randomUUID();
  await creditDeposit({
    agentId: buyer.agentId,
    currency: "USDC",
    amountMicros: USDC(grossUsdc),
    reference: { type: "test", id },
    idempotencyKey: `test:deposit:${id}`,
  });
  const hold = {
    agentId: buyer.agentId,
    currency: "USDC" as const,
    amountMicros: USDC(grossUsdc),
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

/** Empties the platform hot wallet (so a signed payout reverts when mined); answers what it held. */
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

/** A seller whose payout reverted on chain (the hot wallet was emptied between signing and mining). */
async function failedPayout() {
  const seller = await buildAgent("seller");
  const { address: wallet } = await chain.newWallet({ eth: 0n });
  await linkWalletDirect(seller.agentId, wallet);
  const payable = await accrue(seller, 13);
  await processPayoutSweep();
  const [payout] = await db()("payouts").where({ seller_id: seller.agentId });
  const sink = (await chain.newWallet()).address;
  let drained = 0n;
  await processPayout(payout.id, {
    beforeBroadcast: async () => {
      drained = await drainPlatform(sink);
    },
  });
  await chain.mine(1);
  expect(await confirmPayout(payout.id)).toEqual({ status: "failed", reason: "transaction_reverted" });
  await chain.mint(platform.address, drained);
  return { seller, wallet, payable, payoutId: payout.id as string };
}

const admin = { key: ADMIN_KEY };

describe("GET /api/admin/money", () => {
  it("lists a failed payout with its evidence; needs the admin key", async () => {
    const { payoutId } = await failedPayout();
    expect((await api("GET", "/api/admin/money")).status).toBe(401);
    const res = await api("GET", "/api/admin/money", admin);
    expect(res.status).toBe(200);
    const item = res.body.payouts.find((p: { payout_id: string }) => p.payout_id === payoutId);
    expect(item).toMatchObject({ status: "failed", failure_reason: "transaction_reverted" });
    expect(item.evidence.map((e: { state: string }) => e.state).sort()).toEqual(["outcome", "settlement"]);
    expect(res.body).toMatchObject({ settlements: expect.any(Array), deposits: expect.any(Array) });
  });
});

describe("POST /api/admin/money/payouts/{id}/retry", () => {
  it("ten concurrent retries make one new payout and one transfer; the seller is paid exactly once", async () => {
    const { seller, wallet, payable, payoutId } = await failedPayout();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        api("POST", `/api/admin/money/payouts/${payoutId}/retry`, {
          ...admin,
          headers: { "x-request-id": `retry-${randomBytes(6).toString("hex")}` },
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const actions = answers.map((a) => a.body.action).sort();
    expect(actions.filter((a) => a === "retried")).toHaveLength(1);
    expect(actions.filter((a) => a === "already_retried")).toHaveLength(9);
    const newIds = new Set(answers.map((a) => a.body.payout.payout_id));
    expect(newIds.size).toBe(1);
    const [newId] = [...newIds] as string[];
    expect(newId).not.toBe(payoutId);

    const payouts = await db()("payouts").where({ seller_id: seller.agentId }).orderBy("created_at");
    expect(payouts).toHaveLength(2);
    expect(payouts[1]).toMatchObject({
      id: newId,
      status: "pending",
      amount_micros: payable.toString(),
      to_address: wallet,
    });

    // The workers may run the new payout's job more than once, even at the same time: one transfer.
    await Promise.all([processPayout(newId!), processPayout(newId!), processPayout(newId!)]);
    await chain.mine(1);
    expect(await confirmPayout(newId!)).toMatchObject({ status: "confirmed" });
    expect(await db()("chain_transactions").where({ purpose: "payout", subject_id: newId })).toHaveLength(1);
    expect(await tokenBalance(wallet)).toBe(payable);
    expect((await balances(seller.agentId, "USDC")).payable).toBe(0n);

    // Later retries answer the same payout; the confirmed one cannot be retried.
    const again = await api("POST", `/api/admin/money/payouts/${payoutId}/retry`, admin);
    expect(again.body).toMatchObject({
      action: "already_retried",
      payout: { payout_id: newId, status: "confirmed" },
    });
    const confirmed = await api("POST", `/api/admin/money/payouts/${newId}/retry`, admin);
    expect(confirmed.status).toBe(409);
    expect(confirmed.body.error.code).toBe("CONFLICT");
    expect(await db()("payouts").where({ seller_id: seller.agentId })).toHaveLength(2);

    const audit = await db()("audit_events").where({
      subject_type: "payout",
      subject_id: payoutId,
      action: "payout.retried",
    });
    expect(audit).toHaveLength(1);
    expect(audit[0].data).toMatchObject({ new_payout_id: newId, by: "operator" });
    expect(audit[0].request_id).toMatch(/^retry-/);
    const created = await db()("audit_events").where({
      subject_type: "payout",
      subject_id: newId,
      action: "payout.created",
    });
    expect(created[0].data).toMatchObject({ retry_of: payoutId, by: "operator" });
  });

  it("re-drives an open payout's job instead of making another; unknown ids are 404", async () => {
    const seller = await buildAgent("seller");
    const { address: wallet } = await chain.newWallet({ eth: 0n });
    await linkWalletDirect(seller.agentId, wallet);
    await accrue(seller, 12);
    await processPayoutSweep();
    const [open] = await db()("payouts").where({ seller_id: seller.agentId });
    const res = await api("POST", `/api/admin/money/payouts/${open.id}/retry`, admin);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ action: "redriven", payout: { payout_id: open.id, status: "pending" } });
    expect(await db()("payouts").where({ seller_id: seller.agentId })).toHaveLength(1);
    const job = await getQueue("payouts").getJob(open.id);
    expect(job?.data).toEqual({ payout_id: open.id });
    const audit = await db()("audit_events").where({ subject_id: open.id, action: "payout.redriven" });
    expect(audit).toHaveLength(1);
    expect((await api("POST", `/api/admin/money/payouts/${randomUUID()}/retry`, admin)).status).toBe(404);
  });
});

describe("POST /api/admin/money/deposits/{id}/recheck", () => {
  it("lists an open deposit and sends its confirmation job again, once per call, audited; a final one is 409", async () => {
    overrideConfig({ depositVerifyWaitMs: 0 });
    const agent = await buildAgent("buyer");
    const { address } = await chain.newWallet({ eth: 0n });
    await linkWalletDirect(agent.agentId, address);
    const verify = await api("POST", "/api/wallet/purchase/verify", {
      key: agent.apiKey,
      body: { tx_hash: `0x${randomBytes(32).toString("hex")}` },
    });
    expect(verify.status).toBe(202);
    const depositId = verify.body.deposit_id as string;

    const listed = await api("GET", "/api/admin/money?stuck_after_seconds=0", admin);
    const item = listed.body.deposits.find((d: { deposit_id: string }) => d.deposit_id === depositId);
    expect(item).toMatchObject({ status: "pending", agent_id: agent.agentId });

    // Its job is still queued (no worker here): a re-check leaves it; once gone, a re-check adds it.
    const queue = getQueue("settlement-confirmations");
    expect(await queue.getJob(depositId)).toBeDefined();
    const first = await api("POST", `/api/admin/money/deposits/${depositId}/recheck`, admin);
    expect(first.body).toMatchObject({ deposit_id: depositId, status: "pending", job: "already_queued" });
    await (await queue.getJob(depositId))!.remove();
    const second = await api("POST", `/api/admin/money/deposits/${depositId}/recheck`, admin);
    expect(second.body.job).toBe("added");
    expect((await queue.getJob(depositId))?.data).toMatchObject({ deposit_id: depositId });
    const audit = await db()("audit_events").where({ subject_id: depositId, action: "deposit.rechecked" });
    expect(audit.map((a: { data: { job: string } }) => a.data.job).sort()).toEqual([
      "added",
      "already_queued",
    ]);

    await db()("deposits").where({ id: depositId }).update({ status: "rejected", rejected_reason: "test" });
    const final = await api("POST", `/api/admin/money/deposits/${depositId}/recheck`, admin);
    expect(final.status).toBe(409);
  });
});

describe("POST /api/admin/money/settlements/{id}/recheck and deposits/{id}/recheck", () => {
  it("answer 404 for unknown ids", async () => {
    expect((await api("POST", `/api/admin/money/settlements/${randomUUID()}/recheck`, admin)).status).toBe(
      404,
    );
    expect((await api("POST", `/api/admin/money/deposits/${randomUUID()}/recheck`, admin)).status).toBe(404);
  });
});
