import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_TOKEN_ABI } from "../../shared/chain/test-token-artifact.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { setCustody } from "../../shared/money/gate/custody.js";
import { processX402Settlement } from "../../shared/x402/settlement.js";
import { type LocalChain, localWalletClient, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { usdcBalance, x402Buyer } from "../helpers/x402.js";

// The settlement of an x402 payment, driven by hand (no settlement worker runs in this file): the API
// answers at once (X402_SETTLEMENT_WAIT_MS=0) with only what has evidence, then processX402Settlement
// waits while custody is frozen, resumes a transaction signed before a crash without a second transfer,
// waits for confirmations, and fails loudly once the authorization can no longer be settled.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("x402set");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ x402SettlementWaitMs: 0 });
  service = await startService();
  seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { done: true } }));
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

/** A paid call answered before its settlement: returns the payment id, the buyer and the answer. */
async function paidCall() {
  const listing = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });
  const buyer = await x402Buyer(chain, 100_000n);
  const res = await buyer.pay(`http://127.0.0.1:${getConfig().port}/api/x402/invoke/${listing.id}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: {} }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as any;
  return { paymentId: body.payment.payment_id as string, buyer, body, res };
}

const chainTxs = (paymentId: string) =>
  db()("chain_transactions").where({ purpose: "x402_settlement", subject_id: paymentId });

describe("processX402Settlement", () => {
  it("answers with only what has evidence: no transaction yet → no PAYMENT-RESPONSE", async () => {
    const { body, res } = await paidCall();
    expect(body.settlement).toMatchObject({
      state: "pending_submission",
      transaction: null,
      transaction_null_reason: "not_submitted_yet",
    });
    expect(res.headers.get("payment-response")).toBeNull();
  });

  it("waits while custody is frozen, then settles once it is open again", async () => {
    const { paymentId, buyer } = await paidCall();
    await setCustody(true, "freeze mid-way", "x402-settlement-test");
    try {
      expect(await processX402Settlement(paymentId)).toMatchObject({
        status: "waiting",
        reason: "platform_custody_frozen",
      });
      expect(await chainTxs(paymentId)).toHaveLength(0);
      expect(await usdcBalance(chain, buyer.wallet.address)).toBe(100_000n);
    } finally {
      await setCustody(false, "unfreeze", "x402-settlement-test");
    }
    expect(await processX402Settlement(paymentId)).toMatchObject({ status: "settled" });
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(50_000n);
  });

  it("resumes a transaction signed before a crash: the same bytes, one transfer", async () => {
    const { paymentId, buyer } = await paidCall();
    const crashed = await processX402Settlement(paymentId, {
      beforeBroadcast: async () => {
        throw new Error("worker killed between signing and broadcast");
      },
    });
    expect(crashed.status).toBe("waiting");
    const [signed] = await chainTxs(paymentId);
    expect(signed).toMatchObject({ status: "signed" });
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(100_000n);

    const resumed = await processX402Settlement(paymentId);
    expect(resumed).toMatchObject({ status: "settled", txHash: signed.tx_hash });
    expect(await chainTxs(paymentId)).toHaveLength(1);
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(50_000n);
    expect(await processX402Settlement(paymentId)).toEqual({ status: "already_final", final: "settled" });
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(50_000n);
  });

  it("reports submitted until the confirmations are there, then confirmed with the block", async () => {
    const { paymentId, body } = await paidCall();
    overrideConfig({ chainConfirmations: 3 });
    try {
      expect(await processX402Settlement(paymentId)).toMatchObject({
        status: "waiting",
        reason: "awaiting_confirmations",
      });
      const submitted = await api("GET", `/api/x402/status/${body.invocation_id}`);
      expect(submitted.body.settlement).toMatchObject({ state: "submitted", block_number: null });
      expect(submitted.body.settlement.transaction).toMatch(/^0x/);
      await chain.mine(2);
      expect(await processX402Settlement(paymentId)).toMatchObject({ status: "settled" });
      const confirmed = await api("GET", `/api/x402/status/${body.invocation_id}`);
      expect(confirmed.body.settlement).toMatchObject({ state: "confirmed", confirmations: 3 });
    } finally {
      overrideConfig({ chainConfirmations: 1 });
    }
  });

  it("fails loudly, without a transfer, when the authorization expires before it could be submitted", async () => {
    const { paymentId, buyer, body } = await paidCall();
    await db()("x402_payments")
      .where({ id: paymentId })
      .update({ valid_before: String(Math.floor(Date.now() / 1000)) });
    expect(await processX402Settlement(paymentId)).toMatchObject({
      status: "settlement_failed",
      reason: "authorization_expired_before_settlement",
    });
    expect(await chainTxs(paymentId)).toHaveLength(0);
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(100_000n);
    const status = await api("GET", `/api/x402/status/${body.invocation_id}`);
    expect(status.body.settlement).toMatchObject({ state: "settlement_failed" });
    expect(status.body.payment.status).toBe("settlement_failed");
  });

  it("fails at once when the payer cancelled the authorization before it was submitted", async () => {
    const { paymentId, buyer } = await paidCall();
    const payment = await db()("x402_payments").where({ id: paymentId }).first();
    const nonce = payment.authorization_nonce as Hex;
    const signature = await buyer.wallet.account.signTypedData({
      domain: {
        name: "USD Coin",
        version: "2",
        chainId: chain.chainId,
        verifyingContract: chain.tokenAddress,
      },
      types: {
        CancelAuthorization: [
          { name: "authorizer", type: "address" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "CancelAuthorization",
      message: { authorizer: buyer.wallet.address, nonce },
    });
    const hash = await localWalletClient(chain, buyer.wallet.account).writeContract({
      address: chain.tokenAddress,
      abi: TEST_TOKEN_ABI,
      functionName: "cancelAuthorization",
      args: [buyer.wallet.address, nonce, signature],
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    expect(await processX402Settlement(paymentId)).toMatchObject({
      status: "settlement_failed",
      reason: "authorization_nonce_consumed_elsewhere",
    });
    expect(await chainTxs(paymentId)).toHaveLength(0);
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(100_000n);
  });
});
