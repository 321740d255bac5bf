import type { Worker } from "bullmq";
import {
  type Address,
  getAddress,
  type Hex,
  type PrivateKeyAccount,
  parseSignature,
  serializeSignature,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { db } from "../../shared/db/knex.js";
import {
  AUTHORIZATION_TTL_SECONDS,
  authorizeDeposit,
  DEPOSIT_AUTHORIZATION_PURPOSE,
  MAX_OPEN_DEPOSIT_REQUESTS,
} from "../../shared/money/deposits/authorization.js";
import { confirmDeposit } from "../../shared/money/deposits/confirmation.js";
import { resetGateCache } from "../../shared/money/gate/availability.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import {
  type LocalChain,
  type LocalWallet,
  signTransferAuthorization,
  startLocalChain,
} from "../helpers/chain.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { rowCounts, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";
import { linkWalletViaApi } from "../helpers/wallets.js";

// Gasless deposits on a real local chain: the depositor's wallet holds USDC and no ETH, signs the
// EIP-3009 authorization the server stored, and the platform submits it (paying the gas); the ordinary
// deposit confirmation credits it once. Its own database: it freezes custody and counts every row.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platform: PrivateKeyAccount;
let service: TestService;

beforeAll(async () => {
  ownDb = await useOwnDatabase("gasless");
  chain = await startLocalChain();
  platform = await usePaidChain(chain);
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

const TABLES = [
  "deposit_requests",
  "deposits",
  "chain_transactions",
  "payment_evidence",
  "job_outbox",
  "ledger_transactions",
  "audit_events",
] as const;

/** An agent whose linked wallet (proven through the API) holds `amount` USDC and exactly 0 ETH. */
async function gaslessAgent(amount = 100): Promise<{ agent: TestAgent; wallet: LocalWallet }> {
  const agent = await buildAgent();
  const wallet = await chain.newWallet({ usdcMicros: usdc(amount) });
  await chain.fundEth(wallet.address, 0n);
  await linkWalletViaApi(agent, wallet.account);
  return { agent, wallet };
}

async function requestAuthorization(agent: TestAgent, amount_usdc: string) {
  return api("POST", "/api/wallet/purchase", {
    key: agent.apiKey,
    body: { amount_usdc, method: "authorization" },
  });
}

/** Signs the typed data exactly as the API returned it (JSON, integers as strings), as a wallet would. */
async function signTypedData(account: PrivateKeyAccount, typedData: any): Promise<Hex> {
  return account.signTypedData(typedData);
}

async function authorize(agent: TestAgent, deposit_request_id: string, signature: string) {
  return api("POST", "/api/wallet/purchase/authorize", {
    key: agent.apiKey,
    body: { deposit_request_id, signature },
  });
}

async function usdcOf(address: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "balanceOf",
    args: [address],
  });
}

async function available(agent: TestAgent): Promise<bigint> {
  return (await balances(agent.agentId, "USDC")).available;
}

async function submissions(requestId: string) {
  return db()("chain_transactions").where({ purpose: DEPOSIT_AUTHORIZATION_PURPOSE, subject_id: requestId });
}

async function setCustody(frozen: boolean): Promise<void> {
  await db()("platform_settings")
    .where({ key: "custody" })
    .update({ value: JSON.stringify({ frozen, reason: frozen ? "test_freeze" : null }) });
  resetGateCache();
}

describe("a gasless deposit end to end (worker)", () => {
  let worker: Worker | undefined;
  afterAll(async () => worker?.close());

  it("credits a wallet with no ETH once; the platform submits the transfer and pays the gas", async () => {
    worker = startSettlementConfirmationsWorker();
    await worker.waitUntilReady();
    const { agent, wallet } = await gaslessAgent(50);
    const platformBefore = await usdcOf(platform.address);
    const platformEthBefore = await chain.publicClient.getBalance({ address: platform.address });

    const purchase = await requestAuthorization(agent, "12.5");
    expect(purchase.status).toBe(200);
    expect(purchase.body).toMatchObject({
      method: "authorization",
      status: "awaiting_signature",
      amount_atomic: "12500000",
      next: { method: "POST", path: "/api/wallet/purchase/authorize" },
    });
    const { deposit_request_id, typed_data, expires_at } = purchase.body.authorization;
    expect(typed_data).toMatchObject({
      domain: {
        name: "USD Coin",
        version: "2",
        chainId: 31337,
        verifyingContract: getAddress(chain.tokenAddress),
      },
      primaryType: "TransferWithAuthorization",
      message: { from: wallet.address, to: platform.address, value: "12500000", validAfter: "0" },
    });
    expect(typed_data.message.nonce).toMatch(/^0x[0-9a-f]{64}$/);
    const ttl = Number(typed_data.message.validBefore) - Date.now() / 1000;
    expect(ttl).toBeGreaterThan(AUTHORIZATION_TTL_SECONDS - 60);
    expect(ttl).toBeLessThanOrEqual(AUTHORIZATION_TTL_SECONDS);
    expect(new Date(expires_at).getTime()).toBe(Number(typed_data.message.validBefore) * 1000);

    const signature = await signTypedData(wallet.account, typed_data);
    const res = await authorize(agent, deposit_request_id, signature);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      from_address: wallet.address,
      to_address: platform.address,
      replayed: false,
    });
    expect(res.headers.get("location")).toBe(res.body.status_url);
    const [tx] = await submissions(deposit_request_id);
    expect(tx).toMatchObject({ tx_hash: res.body.tx_hash, from_address: platform.address.toLowerCase() });

    await expect
      .poll(
        async () =>
          (await api("GET", `/api/wallet/deposits/${res.body.deposit_id}`, { key: agent.apiKey })).body
            .status,
        {
          timeout: 10_000,
        },
      )
      .toBe("credited");
    const view = await api("GET", `/api/wallet/deposits/${res.body.deposit_id}`, { key: agent.apiKey });
    expect(view.body).toMatchObject({ amount_usdc: "12.500000", from_address: wallet.address });
    expect(view.body.evidence.map((e: any) => e.state).sort()).toEqual([
      "authorization",
      "confirmation",
      "deposit",
    ]);
    expect(view.body.evidence.find((e: any) => e.state === "authorization")).toMatchObject({
      source: "eip3009_signature",
      source_ref: deposit_request_id,
      amount_usdc: "12.500000",
    });

    expect(await available(agent)).toBe(usdc(12.5));
    expect(await usdcOf(platform.address)).toBe(platformBefore + usdc(12.5));
    expect(await usdcOf(wallet.address)).toBe(usdc(37.5));
    // The depositor paid no gas; the platform did.
    expect(await chain.publicClient.getBalance({ address: wallet.address })).toBe(0n);
    expect(await chain.publicClient.getBalance({ address: platform.address })).toBeLessThan(
      platformEthBefore,
    );

    // Authorizing the same request again: the same deposit, no second transaction or credit.
    const again = await authorize(agent, deposit_request_id, signature);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ deposit_id: res.body.deposit_id, status: "credited", replayed: true });
    expect(await submissions(deposit_request_id)).toHaveLength(1);
    expect(await available(agent)).toBe(usdc(12.5));
    expect(await usdcOf(platform.address)).toBe(platformBefore + usdc(12.5));
  });
});

describe("one request, one transaction", () => {
  it("makes one transaction and one credit when the same request is authorized concurrently", async () => {
    const { agent, wallet } = await gaslessAgent(20);
    const platformBefore = await usdcOf(platform.address);
    const purchase = await requestAuthorization(agent, "7");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const signature = await signTypedData(wallet.account, typed_data);

    const answers = await Promise.all(
      Array.from({ length: 4 }, () => authorize(agent, deposit_request_id, signature)),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    expect(new Set(answers.map((a) => a.body.deposit_id)).size).toBe(1);
    expect(answers.filter((a) => a.body.replayed === false)).toHaveLength(1);
    expect(await submissions(deposit_request_id)).toHaveLength(1);
    expect(await db()("deposits").where({ agent_id: agent.agentId })).toHaveLength(1);

    const outcomes = await Promise.all([
      confirmDeposit(answers[0]!.body.deposit_id),
      confirmDeposit(answers[0]!.body.deposit_id),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["already_final", "credited"]);
    expect(await available(agent)).toBe(usdc(7));
    expect(await usdcOf(platform.address)).toBe(platformBefore + usdc(7));
    expect(await usdcOf(wallet.address)).toBe(usdc(13));
  });

  it("sends again a transaction that was recorded but never broadcast, and credits it", async () => {
    const { agent, wallet } = await gaslessAgent(10);
    const purchase = await requestAuthorization(agent, "3");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const signature = await signTypedData(wallet.account, typed_data);
    const result = await authorizeDeposit(agent.agentId, { deposit_request_id, signature }, "test-crash", {
      beforeBroadcast: async () => {
        throw new Error("simulated broadcast failure");
      },
    });
    expect(result).toMatchObject({ created: true, deposit: { status: "pending" } });
    const [tx] = await submissions(deposit_request_id);
    expect(tx.status).toBe("signed");
    expect(await usdcOf(wallet.address)).toBe(usdc(10));

    // The confirmation finds no receipt, re-broadcasts the recorded bytes, and credits on the next look.
    expect(await confirmDeposit(result.deposit.id)).toMatchObject({ status: "waiting" });
    expect(await confirmDeposit(result.deposit.id)).toMatchObject({
      status: "credited",
      amountMicros: usdc(3),
    });
    expect(await usdcOf(wallet.address)).toBe(usdc(7));
    expect(await available(agent)).toBe(usdc(3));
  });
});

describe("refusals record nothing", () => {
  it("refuses a signature by another key with 400 WALLET_SIGNATURE_INVALID", async () => {
    const { agent, wallet } = await gaslessAgent();
    const stranger = await chain.newWallet();
    const purchase = await requestAuthorization(agent, "5");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const counts = await rowCounts(TABLES);

    const res = await authorize(agent, deposit_request_id, await signTypedData(stranger.account, typed_data));
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("WALLET_SIGNATURE_INVALID");
    expect(res.body.error.details).toMatchObject({
      expected_signer: wallet.address,
      recovered_signer: stranger.address,
    });
    // The linked wallet signing another message (a different amount) does not prove this request either.
    const { signature: otherAmount } = await signTransferAuthorization({
      account: wallet.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: platform.address,
      valueMicros: usdc(500),
      validBefore: BigInt(typed_data.message.validBefore),
      nonce: typed_data.message.nonce,
    });
    expect((await authorize(agent, deposit_request_id, otherAmount)).status).toBe(400);
    // Unparseable v.
    const good = await signTypedData(wallet.account, typed_data);
    expect((await authorize(agent, deposit_request_id, `${good.slice(0, -2)}25`)).status).toBe(400);
    expect(await rowCounts(TABLES)).toEqual(counts);
    expect(await usdcOf(wallet.address)).toBe(usdc(100));

    // A signature with v as 0/1 (some wallets) is the same signature: accepted.
    const { r, s, yParity } = parseSignature(good);
    const low = `${serializeSignature({ r, s, yParity }).slice(0, -2)}0${yParity}`;
    expect((await authorize(agent, deposit_request_id, low)).status).toBe(202);
  });

  it("refuses an expired request with 409 deposit_request_expired", async () => {
    const { agent, wallet } = await gaslessAgent();
    const purchase = await requestAuthorization(agent, "5");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const past = Math.floor(Date.now() / 1000) - 10;
    await db()("deposit_requests").where({ id: deposit_request_id }).update({ valid_before: past });
    const signature = await signTypedData(wallet.account, {
      ...typed_data,
      message: { ...typed_data.message, validBefore: String(past) },
    });
    const counts = await rowCounts(TABLES);
    const res = await authorize(agent, deposit_request_id, signature);
    expect(res.status).toBe(409);
    expect(res.body.error.details.reason).toBe("deposit_request_expired");
    expect(await rowCounts(TABLES)).toEqual(counts);
  });

  it("answers 404 for another agent's request and 422 without a linked wallet", async () => {
    const { agent, wallet } = await gaslessAgent();
    const other = await gaslessAgent();
    const purchase = await requestAuthorization(agent, "5");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const signature = await signTypedData(wallet.account, typed_data);
    const counts = await rowCounts(TABLES);
    const res = await authorize(other.agent, deposit_request_id, signature);
    expect(res.status).toBe(404);
    expect(errorCode(res)).toBe("NOT_FOUND");
    expect(await rowCounts(TABLES)).toEqual(counts);

    const unlinked = await buildAgent();
    const refused = await requestAuthorization(unlinked, "5");
    expect(refused.status).toBe(422);
    expect(errorCode(refused)).toBe("WALLET_NOT_LINKED");
  });

  it("refuses with 402 insufficient_usdc_balance when the wallet lacks the USDC; the same request works once funded", async () => {
    const { agent, wallet } = await gaslessAgent(1);
    const purchase = await requestAuthorization(agent, "5");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const signature = await signTypedData(wallet.account, typed_data);
    const counts = await rowCounts(TABLES);
    const res = await authorize(agent, deposit_request_id, signature);
    expect(res.status).toBe(402);
    expect(errorCode(res)).toBe("PAYMENT_REQUIRED");
    expect(res.body.error.details).toMatchObject({
      reason: "insufficient_usdc_balance",
      balance_usdc: "1.000000",
      required_usdc: "5.000000",
    });
    expect(await rowCounts(TABLES)).toEqual(counts);
    expect(await submissions(deposit_request_id)).toHaveLength(0);

    await chain.mint(wallet.address, usdc(4));
    const retried = await authorize(agent, deposit_request_id, signature);
    expect(retried.status).toBe(202);
    expect((await confirmDeposit(retried.body.deposit_id)).status).toBe("credited");
    expect(await available(agent)).toBe(usdc(5));
  });

  it("caps open requests per agent (429) and drops ones that expired unused a day ago", async () => {
    const { agent } = await gaslessAgent();
    const ids: string[] = [];
    for (let i = 0; i < MAX_OPEN_DEPOSIT_REQUESTS; i++) {
      const res = await requestAuthorization(agent, "1");
      expect(res.status).toBe(200);
      ids.push(res.body.authorization.deposit_request_id);
    }
    const over = await requestAuthorization(agent, "1");
    expect(over.status).toBe(429);
    expect(errorCode(over)).toBe("RATE_LIMITED");
    // One long expired: it no longer counts, and the next request deletes it.
    const longAgo = Math.floor(Date.now() / 1000) - 2 * 86_400;
    await db()("deposit_requests").where({ id: ids[0] }).update({ valid_before: longAgo });
    expect((await requestAuthorization(agent, "1")).status).toBe(200);
    expect(await db()("deposit_requests").where({ id: ids[0] })).toHaveLength(0);
    expect(await db()("deposit_requests").where({ agent_id: agent.agentId })).toHaveLength(
      MAX_OPEN_DEPOSIT_REQUESTS,
    );
  });

  it("answers 503 for both steps while custody is frozen and changes no row", async () => {
    const { agent, wallet } = await gaslessAgent();
    const purchase = await requestAuthorization(agent, "5");
    const { deposit_request_id, typed_data } = purchase.body.authorization;
    const signature = await signTypedData(wallet.account, typed_data);
    await setCustody(true);
    try {
      const counts = await rowCounts(TABLES);
      const request = await requestAuthorization(agent, "5");
      expect(request.status).toBe(503);
      expect(request.body.error.details.reason).toBe("platform_custody_frozen");
      const res = await authorize(agent, deposit_request_id, signature);
      expect(res.status).toBe(503);
      expect(errorCode(res)).toBe("TEMPORARILY_UNAVAILABLE");
      expect(await rowCounts(TABLES)).toEqual(counts);
      expect(await usdcOf(wallet.address)).toBe(usdc(100));
    } finally {
      await setCustody(false);
    }
  });
});
