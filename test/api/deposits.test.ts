import { randomBytes } from "node:crypto";
import type { Worker } from "bullmq";
import type { Address, Hash, PrivateKeyAccount } from "viem";
import { getAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { TEST_TOKEN_ABI, TEST_TOKEN_BYTECODE } from "../../shared/chain/test-token-artifact.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { confirmDeposit } from "../../shared/money/deposits/confirmation.js";
import { resetGateCache } from "../../shared/money/gate/availability.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { getQueue } from "../../shared/queues.js";
import {
  processSettlementConfirmation,
  startSettlementConfirmationsWorker,
} from "../../workers/settlement-confirmations.js";
import { type LocalChain, type LocalWallet, localWalletClient, startLocalChain } from "../helpers/chain.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";
import { linkWalletViaApi } from "../helpers/wallets.js";

// Deposits end to end on a real local chain: link → transfer USDC → verify → confirm → credit. This file
// has a database of its own because it freezes custody (platform-wide) and counts rows before and after.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platform: PrivateKeyAccount;
let service: TestService;

beforeAll(async () => {
  ownDb = await useOwnDatabase("deposits");
  chain = await startLocalChain();
  platform = await usePaidChain(chain);
  // Most tests here drive the worker's check (confirmDeposit) step by step, so verify only records the
  // claim; "verify answers what the chain shows" turns its own chain read back on.
  overrideConfig({ depositVerifyWaitMs: 0 });
  service = await startService({ worker: false, sweeper: false });
});

afterAll(async () => {
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

const USDC = (n: number) => BigInt(Math.round(n * 1_000_000));

/** An agent whose linked wallet (proven through the API) holds `usdc` test USDC and gas. */
async function fundedAgent(usdc = 100): Promise<{ agent: TestAgent; wallet: LocalWallet }> {
  const agent = await buildAgent();
  const wallet = await chain.newWallet({ usdcMicros: USDC(usdc) });
  await linkWallet(agent, wallet.account);
  return { agent, wallet };
}

const linkWallet = linkWalletViaApi;

/** Sends an ERC-20 transfer of the test token and waits until it is mined (whatever its status). */
async function transfer(from: LocalWallet, to: Address, micros: bigint, gas?: bigint): Promise<Hash> {
  const hash = await localWalletClient(chain, from.account).writeContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "transfer",
    args: [to, micros],
    ...(gas ? { gas } : {}),
  });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

async function verify(agent: TestAgent, txHash: string) {
  return api("POST", "/api/wallet/purchase/verify", { key: agent.apiKey, body: { tx_hash: txHash } });
}

async function available(agent: TestAgent): Promise<bigint> {
  return (await balances(agent.agentId, "USDC")).available;
}

async function deposit(agent: TestAgent, id: string) {
  return (await api("GET", `/api/wallet/deposits/${id}`, { key: agent.apiKey })).body;
}

async function setCustody(frozen: boolean): Promise<void> {
  await db()("platform_settings")
    .where({ key: "custody" })
    .update({ value: JSON.stringify({ frozen, reason: frozen ? "test_freeze" : null }) });
}

async function rowCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of [
    "deposits",
    "ledger_transactions",
    "ledger_entries",
    "payment_evidence",
    "job_outbox",
  ]) {
    const [row] = await db()(table).count({ n: "*" });
    counts[table] = Number(row!.n);
  }
  return counts;
}

describe("a deposit end to end (worker)", () => {
  let worker: Worker | undefined;
  afterAll(async () => worker?.close());

  it("credits a transfer from the linked wallet exactly once, visible in GET /api/wallet", async () => {
    worker = startSettlementConfirmationsWorker();
    await worker.waitUntilReady();
    const { agent, wallet } = await fundedAgent();

    const purchase = await api("POST", "/api/wallet/purchase", {
      key: agent.apiKey,
      body: { amount_usdc: "12.5" },
    });
    expect(purchase.status).toBe(200);
    expect(purchase.body.transfer).toMatchObject({
      chain_id: 31337,
      network: "eip155:31337",
      token_address: getAddress(chain.tokenAddress),
      from_address: wallet.address,
      to_address: platform.address,
    });
    expect(purchase.body).toMatchObject({ amount_usdc: "12.500000", amount_atomic: "12500000" });
    expect(purchase.body.chain.platform_address).toBe(platform.address);

    const hash = await transfer(
      wallet,
      purchase.body.transfer.to_address,
      BigInt(purchase.body.amount_atomic),
    );
    const res = await verify(agent, hash);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ tx_hash: hash, replayed: false, from_address: wallet.address });
    expect(res.headers.get("location")).toBe(res.body.status_url);

    await expect
      .poll(async () => (await deposit(agent, res.body.deposit_id)).status, { timeout: 10_000 })
      .toBe("credited");
    const credited = await deposit(agent, res.body.deposit_id);
    expect(credited).toMatchObject({
      amount_usdc: "12.500000",
      confirmations: { seen: 1, required: 1 },
      rejected_reason: null,
    });
    expect(credited.evidence.map((e: any) => e.state).sort()).toEqual(["confirmation", "deposit"]);
    expect(credited.evidence.find((e: any) => e.state === "deposit").source_ref).toBe(
      credited.ledger_transaction_id,
    );
    const ledgerTx = await db()("ledger_transactions").where({ id: credited.ledger_transaction_id }).first();
    expect(ledgerTx).toMatchObject({ kind: "deposit", idempotency_key: `ledger:deposit:31337:${hash}` });

    const view = await api("GET", "/api/wallet", { key: agent.apiKey });
    expect(view.body.balances.USDC.available_usdc).toBe("12.500000");
    expect(view.body.funding).toMatchObject({ status: "available", paid_execution_enabled: true });
    expect(view.body.pending_deposits).toEqual([]);
    expect(view.body.recent_deposits.map((d: any) => d.deposit_id)).toEqual([res.body.deposit_id]);

    // The same hash again: the same deposit, no second credit, even re-run by the worker.
    const again = await verify(agent, hash);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ deposit_id: res.body.deposit_id, status: "credited", replayed: true });
    expect(await confirmDeposit(res.body.deposit_id)).toEqual({ status: "already_final", final: "credited" });
    expect(await available(agent)).toBe(USDC(12.5));
  });
});

describe("claims and rejections", () => {
  it("refuses a hash another agent claimed with 409 and credits nothing to it", async () => {
    const { agent, wallet } = await fundedAgent();
    const other = await fundedAgent();
    const hash = await transfer(wallet, platform.address, USDC(3));
    expect((await verify(agent, hash)).status).toBe(202);
    const res = await verify(other.agent, hash);
    expect(res.status).toBe(409);
    expect(errorCode(res)).toBe("CONFLICT");
    expect(res.body.error.details.reason).toBe("tx_hash_claimed_by_another_agent");
    expect(await db()("deposits").where({ agent_id: other.agent.agentId })).toHaveLength(0);
    const [first] = await db()("deposits").where({ tx_hash: hash });
    expect((await confirmDeposit(first.id)).status).toBe("credited");
    expect(await available(other.agent)).toBe(0n);
    expect(await available(agent)).toBe(USDC(3));
    // Reading it as the other agent is 404, as is a malformed id.
    expect((await api("GET", `/api/wallet/deposits/${first.id}`, { key: other.agent.apiKey })).status).toBe(
      404,
    );
    expect((await api("GET", "/api/wallet/deposits/nope", { key: agent.apiKey })).status).toBe(404);
  });

  it("rejects a transfer to another address (wrong_recipient) and credits nothing", async () => {
    const { agent, wallet } = await fundedAgent();
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
    const hash = await transfer(wallet, elsewhere, USDC(4));
    const res = await verify(agent, hash);
    expect(await confirmDeposit(res.body.deposit_id)).toEqual({
      status: "rejected",
      reason: "wrong_recipient",
    });
    const view = await deposit(agent, res.body.deposit_id);
    expect(view).toMatchObject({
      status: "rejected",
      rejected_reason: "wrong_recipient",
      amount_usdc: null,
    });
    expect(view.evidence).toEqual([
      expect.objectContaining({ state: "outcome", source: "chain_receipt", source_ref: hash }),
    ]);
    expect(await available(agent)).toBe(0n);
    // A final rejection is not reopened by verifying again.
    expect((await verify(agent, hash)).body).toMatchObject({ status: "rejected", replayed: true });
  });

  it("rejects a transfer to the platform sent from an address that is not the linked wallet", async () => {
    const { agent } = await fundedAgent();
    const stranger = await chain.newWallet({ usdcMicros: USDC(10) });
    const hash = await transfer(stranger, platform.address, USDC(5));
    const res = await verify(agent, hash);
    expect(await confirmDeposit(res.body.deposit_id)).toEqual({
      status: "rejected",
      reason: "sender_not_linked_wallet",
    });
    expect(await available(agent)).toBe(0n);
  });

  it("rejects a reverted transaction", async () => {
    const { agent, wallet } = await fundedAgent(1);
    // More than the wallet holds; an explicit gas limit skips estimation, so the revert is mined.
    const hash = await transfer(wallet, platform.address, USDC(50), 100_000n);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash });
    expect(receipt.status).toBe("reverted");
    const res = await verify(agent, hash);
    expect(await confirmDeposit(res.body.deposit_id)).toEqual({
      status: "rejected",
      reason: "transaction_reverted",
    });
  });

  it("waits for a hash the chain has not shown, rejects it after the deadline, and reopens it on verify", async () => {
    const { agent } = await fundedAgent();
    const hash = `0x${randomBytes(32).toString("hex")}`;
    const res = await verify(agent, hash);
    expect(res.status).toBe(202);
    expect(await confirmDeposit(res.body.deposit_id)).toMatchObject({
      status: "waiting",
      reason: "transaction_not_found_yet",
    });
    expect(await deposit(agent, res.body.deposit_id)).toMatchObject({
      status: "pending",
      waiting_reason: "transaction_not_found_yet",
      amount_null_reason: "transaction_not_yet_seen",
    });
    await db()("deposits")
      .where({ id: res.body.deposit_id })
      .update({ not_found_deadline_at: new Date(Date.now() - 1000) });
    expect(await confirmDeposit(res.body.deposit_id)).toEqual({
      status: "rejected",
      reason: "transaction_not_found",
    });
    const reopened = await verify(agent, hash);
    expect(reopened.status).toBe(202);
    expect(reopened.body).toMatchObject({
      deposit_id: res.body.deposit_id,
      status: "pending",
      replayed: true,
    });
  });

  it("validates the hash and needs a linked wallet", async () => {
    const agent = await buildAgent();
    for (const tx_hash of ["0x1234", `0x${"zz".repeat(32)}`, "ab".repeat(32)]) {
      expect((await verify(agent, tx_hash)).status, tx_hash).toBe(400);
    }
    const res = await verify(agent, `0x${"cd".repeat(32)}`);
    expect(res.status).toBe(422);
    expect(errorCode(res)).toBe("WALLET_NOT_LINKED");
    const purchase = await api("POST", "/api/wallet/purchase", {
      key: agent.apiKey,
      body: { amount_usdc: 5 },
    });
    expect(errorCode(purchase)).toBe("WALLET_NOT_LINKED");
    const { agent: linked } = await fundedAgent();
    for (const amount_usdc of ["0.001", "0.0000001", -1, "1000000.000001"]) {
      const r = await api("POST", "/api/wallet/purchase", { key: linked.apiKey, body: { amount_usdc } });
      expect(r.status, String(amount_usdc)).toBe(400);
    }
  });
});

describe("confirmation and crediting rules", () => {
  it("keeps a deposit confirming until it has the required confirmations", async () => {
    const config = getConfig();
    overrideConfig({ chainConfirmations: 3 });
    try {
      const { agent, wallet } = await fundedAgent();
      const hash = await transfer(wallet, platform.address, USDC(7));
      const res = await verify(agent, hash);
      expect(res.body.confirmations).toEqual({ seen: 0, required: 3 });
      expect(await confirmDeposit(res.body.deposit_id)).toMatchObject({
        status: "waiting",
        reason: "awaiting_confirmations",
      });
      const view = await api("GET", "/api/wallet", { key: agent.apiKey });
      expect(view.body.pending_deposits).toEqual([
        expect.objectContaining({
          status: "confirming",
          amount_usdc: "7.000000",
          confirmations: { seen: 1, required: 3 },
          waiting_reason: "awaiting_confirmations",
        }),
      ]);
      expect(await available(agent)).toBe(0n);
      await chain.mine(1);
      expect((await confirmDeposit(res.body.deposit_id)).status).toBe("waiting");
      await chain.mine(1);
      expect(await confirmDeposit(res.body.deposit_id)).toMatchObject({
        status: "credited",
        amountMicros: USDC(7),
      });
      expect((await deposit(agent, res.body.deposit_id)).confirmations).toEqual({ seen: 3, required: 3 });
      expect(await available(agent)).toBe(USDC(7));
    } finally {
      overrideConfig({ chainConfirmations: config.chainConfirmations });
    }
  });

  it("credits once when the same deposit is processed several times in parallel", async () => {
    const { agent, wallet } = await fundedAgent();
    const hash = await transfer(wallet, platform.address, USDC(9.25));
    const res = await verify(agent, hash);
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, () => processSettlementConfirmation({ deposit_id: res.body.deposit_id })),
    );
    expect(outcomes.filter((o) => o.status === "credited")).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === "already_final")).toHaveLength(3);
    expect(await available(agent)).toBe(USDC(9.25));
    expect(
      await db()("ledger_transactions").where({ idempotency_key: `ledger:deposit:31337:${hash}` }),
    ).toHaveLength(1);
    expect(
      await db()("payment_evidence").where({ subject_type: "deposit", subject_id: res.body.deposit_id }),
    ).toHaveLength(2);
  });

  it("credits only the transfers of the verified transaction", async () => {
    const { agent, wallet } = await fundedAgent();
    const first = await transfer(wallet, platform.address, USDC(1));
    await transfer(wallet, platform.address, USDC(2));
    const res = await verify(agent, first);
    expect(await confirmDeposit(res.body.deposit_id)).toMatchObject({
      status: "credited",
      amountMicros: USDC(1),
    });
  });

  it("waits, without rejecting, while the RPC is unreachable", async () => {
    const { agent, wallet } = await fundedAgent();
    const hash = await transfer(wallet, platform.address, USDC(1.5));
    const res = await verify(agent, hash);
    const config = getConfig();
    overrideConfig({ chainRpcUrl: "http://127.0.0.1:1", chainRpcTimeoutMs: 500 });
    try {
      expect(await confirmDeposit(res.body.deposit_id)).toMatchObject({
        status: "waiting",
        reason: "settlement_rpc_unreachable",
      });
      expect((await deposit(agent, res.body.deposit_id)).waiting_reason).toBe("settlement_rpc_unreachable");
    } finally {
      overrideConfig({ chainRpcUrl: config.chainRpcUrl, chainRpcTimeoutMs: config.chainRpcTimeoutMs });
      resetGateCache();
    }
    expect((await confirmDeposit(res.body.deposit_id)).status).toBe("credited");
  });

  it("hands a settlement_id job to the x402 settlement (an unknown payment is reported, not guessed)", async () => {
    await expect(
      processSettlementConfirmation({ settlement_id: "00000000-0000-4000-8000-000000000000" }),
    ).resolves.toEqual({ status: "unknown_payment" });
  });
});

describe("while custody is frozen", () => {
  it("purchase and verify answer 503 and change no row; a deposit verified before is credited after unfreezing", async () => {
    const { agent, wallet } = await fundedAgent();
    const early = await transfer(wallet, platform.address, USDC(6));
    const before = await verify(agent, early);
    expect(before.status).toBe(202);
    const late = await transfer(wallet, platform.address, USDC(2));

    await setCustody(true);
    try {
      const counts = await rowCounts();
      const purchase = await api("POST", "/api/wallet/purchase", {
        key: agent.apiKey,
        body: { amount_usdc: "2" },
      });
      expect(purchase.status).toBe(503);
      expect(errorCode(purchase)).toBe("TEMPORARILY_UNAVAILABLE");
      expect(purchase.body.error.details.reason).toBe("platform_custody_frozen");
      const verified = await verify(agent, late);
      expect(verified.status).toBe(503);
      expect(await rowCounts()).toEqual(counts);

      const outcome = await confirmDeposit(before.body.deposit_id);
      expect(outcome).toMatchObject({
        status: "waiting",
        reason: "paid_execution_unavailable:platform_custody_frozen",
      });
      expect(await available(agent)).toBe(0n);
      expect(await deposit(agent, before.body.deposit_id)).toMatchObject({
        status: "confirming",
        waiting_reason: "paid_execution_unavailable:platform_custody_frozen",
      });
      // The wallet stays readable.
      const view = await api("GET", "/api/wallet", { key: agent.apiKey });
      expect(view.status).toBe(200);
      expect(view.body.funding).toMatchObject({
        status: "temporarily_unavailable",
        reason: "platform_custody_frozen",
      });
    } finally {
      await setCustody(false);
      resetGateCache();
    }
    expect((await confirmDeposit(before.body.deposit_id)).status).toBe("credited");
    expect(await available(agent)).toBe(USDC(6));
  });

  it("answers 503 when no rail is configured, too", async () => {
    const { agent } = await fundedAgent();
    const config = getConfig();
    overrideConfig({ platformSignerKey: undefined });
    try {
      const res = await api("POST", "/api/wallet/purchase", {
        key: agent.apiKey,
        body: { amount_usdc: "1" },
      });
      expect(res.status).toBe(503);
      expect(res.body.error.details.reason).toBe("settlement_signer_not_configured");
    } finally {
      overrideConfig({ platformSignerKey: config.platformSignerKey });
    }
  });
});

describe("verify answers what the chain shows", () => {
  beforeAll(() => overrideConfig({ depositVerifyWaitMs: 5000 }));
  afterAll(() => overrideConfig({ depositVerifyWaitMs: 0 }));

  it("not seen: a hash the chain has not shown", async () => {
    const { agent } = await fundedAgent();
    const res = await verify(agent, `0x${randomBytes(32).toString("hex")}`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      status: "pending",
      state: "not_seen",
      amount_usdc: null,
      amount_null_reason: "transaction_not_yet_seen",
      waiting_reason: "transaction_not_found_yet",
    });
  });

  it("seen with k of n confirmations, then credited once they are there", async () => {
    const config = getConfig();
    overrideConfig({ chainConfirmations: 3 });
    try {
      const { agent, wallet } = await fundedAgent();
      const hash = await transfer(wallet, platform.address, USDC(2));
      const res = await verify(agent, hash);
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({
        state: "confirming",
        amount_usdc: "2.000000",
        confirmations: { seen: 1, required: 3 },
      });
      expect(res.body.message).toContain("1 of 3");
      await chain.mine(2);
      const credited = await verify(agent, hash);
      expect(credited.status).toBe(200);
      expect(credited.body).toMatchObject({ state: "credited", confirmations: { seen: 3, required: 3 } });
    } finally {
      overrideConfig({ chainConfirmations: config.chainConfirmations });
    }
  });

  it("credited: the ledger transaction named; again → already credited; another agent → 409", async () => {
    const { agent, wallet } = await fundedAgent();
    const hash = await transfer(wallet, platform.address, USDC(5));
    const res = await verify(agent, hash);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "credited", state: "credited", replayed: false });
    const ledgerTx = await db()("ledger_transactions").where({ id: res.body.ledger_transaction_id }).first();
    expect(ledgerTx).toMatchObject({ kind: "deposit", idempotency_key: `ledger:deposit:31337:${hash}` });
    expect(res.body.message).toContain(res.body.ledger_transaction_id);
    expect(await available(agent)).toBe(USDC(5));

    const again = await verify(agent, hash);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ state: "credited", replayed: true });
    expect(again.body.message).toMatch(/^Already credited/);
    const other = await fundedAgent();
    const foreign = await verify(other.agent, hash);
    expect(foreign.status).toBe(409);
    expect(foreign.body.error.details.reason).toBe("tx_hash_already_credited");
    expect(await available(agent)).toBe(USDC(5));
  });

  it("refused, with the reason: another token, or USDC sent to another address", async () => {
    const { agent, wallet } = await fundedAgent();
    // Another ERC-20 (a second TestUSDC this wallet deploys and mints), sent to the platform.
    const client = localWalletClient(chain, wallet.account);
    const deployed = await chain.publicClient.waitForTransactionReceipt({
      hash: await client.deployContract({ abi: TEST_TOKEN_ABI, bytecode: TEST_TOKEN_BYTECODE }),
    });
    const otherToken = deployed.contractAddress!;
    await chain.publicClient.waitForTransactionReceipt({
      hash: await client.writeContract({
        address: otherToken,
        abi: TEST_TOKEN_ABI,
        functionName: "mint",
        args: [wallet.address, USDC(9)],
      }),
    });
    const wrongToken = await chain.publicClient.waitForTransactionReceipt({
      hash: await client.writeContract({
        address: otherToken,
        abi: ERC20_ABI,
        functionName: "transfer",
        args: [platform.address, USDC(9)],
      }),
    });
    const refused = await verify(agent, wrongToken.transactionHash);
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({
      status: "rejected",
      state: "refused",
      rejected_reason: "wrong_token",
    });
    expect(refused.body.message).toContain("wrong_token");

    const elsewhere = await transfer(wallet, privateKeyToAccount(generatePrivateKey()).address, USDC(1));
    const misdirected = await verify(agent, elsewhere);
    expect(misdirected.body).toMatchObject({ state: "refused", rejected_reason: "wrong_recipient" });
    expect(await available(agent)).toBe(0n);
  });
});
