import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import type { Worker } from "bullmq";
import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { setCustody } from "../../shared/money/gate/custody.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import {
  type LocalChain,
  localWalletClient,
  signTransferAuthorization,
  startLocalChain,
} from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { type ApiResponse, api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import {
  encodePayload,
  paymentRequiredOf,
  signedPayload,
  usdcBalance,
  type X402Buyer,
  x402Buyer,
  x402RowCounts,
} from "../helpers/x402.js";

// Every way a payment can be refused (402 with a reason, 400 when unreadable) leaves nothing behind:
// each case counts the rows of every table an x402 request may write. Also: two concurrent retries of
// one payment settle once; a failing seller is never settled; the gate closes every paid route (503)
// before any challenge or signature check. Own database: it counts rows and freezes custody.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let settlements: Worker;
let okSeller: TestSeller;
let brokenSeller: TestSeller;
let sellerAgent: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("x402rej");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  okSeller = await startSeller((_call, res) => json(res, 200, { success: true, output: { ok: true } }));
  brokenSeller = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await okSeller?.close();
  await brokenSeller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

/** A fresh quote for a fresh paid listing, and its 402. */
async function quoted(endpointUrl = okSeller.url): Promise<{ quoteId: string; required: PaymentRequired }> {
  const listing = await buildListing({ endpointUrl, price: 0.05, sellerId: sellerAgent.agentId });
  const match = await api("GET", `/api/x402/execute/match?task=${listing.slug}`);
  expect(match.status).toBe(200);
  const challenge = await api("POST", "/api/x402/execute", {
    body: { quote_id: match.body.quote_id, input: {} },
  });
  expect(challenge.status).toBe(402);
  return { quoteId: match.body.quote_id, required: paymentRequiredOf(challenge) };
}

function execute(quoteId: string, payment?: PaymentPayload | string, header = "payment-signature") {
  const value = typeof payment === "string" ? payment : payment ? encodePayload(payment) : undefined;
  return api("POST", "/api/x402/execute", {
    body: { quote_id: quoteId, input: {} },
    headers: value ? { [header]: value } : {},
  });
}

async function expectRefused(send: () => Promise<ApiResponse>, status: number, reason: string) {
  const before = await x402RowCounts();
  const res = await send();
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error.details.reason).toBe(reason);
  expect(await x402RowCounts()).toEqual(before);
  return res;
}

let buyer: X402Buyer;

describe("refused payments leave no trace", () => {
  beforeAll(async () => {
    buyer = await x402Buyer(chain, 1_000_000n);
  });

  const tamper = async (edit: (p: PaymentPayload) => void) => {
    const { quoteId, required } = await quoted();
    const payload = await signedPayload(buyer, required);
    edit(payload);
    return { quoteId, payload };
  };

  it("amount, network, asset and payTo mismatches are 402 with the field, and a fresh challenge", async () => {
    const cases: [string, (p: PaymentPayload) => void][] = [
      ["amount_mismatch", (p) => (p.accepted.amount = "1")],
      ["network_mismatch", (p) => (p.accepted.network = "eip155:8453")],
      ["asset_mismatch", (p) => (p.accepted.asset = getAddress(`0x${"ab".repeat(20)}`))],
      ["pay_to_mismatch", (p) => (p.accepted.payTo = getAddress(`0x${"cd".repeat(20)}`))],
      ["amount_mismatch", (p) => ((p.payload.authorization as { value: string }).value = "49999")],
    ];
    for (const [reason, edit] of cases) {
      const { quoteId, payload } = await tamper(edit);
      const res = await expectRefused(() => execute(quoteId, payload), 402, reason);
      expect(paymentRequiredOf(res).error).toBe(reason);
    }
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(1_000_000n);
  });

  it("a payment made for another quote is refused", async () => {
    const a = await quoted();
    const b = await quoted();
    const forB = await signedPayload(buyer, b.required);
    await expectRefused(() => execute(a.quoteId, forB), 402, "payment_for_another_quote");
  });

  it("a bad signature is refused with the facilitator's reason", async () => {
    const { quoteId, payload } = await tamper((p) => {
      const sig = p.payload.signature as string;
      p.payload.signature = `${sig.slice(0, 10)}${sig[10] === "0" ? "1" : "0"}${sig.slice(11)}`;
    });
    const res = await expectRefused(() => execute(quoteId, payload), 402, "invalid_exact_evm_signature");
    expect(res.body.error.details.facilitator.invalid_reason).toBe("invalid_exact_evm_signature");
  });

  it("malformed headers are 400, whichever protocol", async () => {
    const { quoteId } = await quoted();
    await expectRefused(() => execute(quoteId, "not base64 !!"), 400, "malformed_payment_header");
    await expectRefused(
      () => execute(quoteId, Buffer.from('{"x402Version":2,"accepted":{}}').toString("base64")),
      400,
      "malformed_payment_header",
    );
    await expectRefused(
      () => execute(quoteId, "Payment %%%", "authorization"),
      400,
      "malformed_payment_header",
    );
    await expectRefused(
      () =>
        execute(quoteId, `Payment ${Buffer.from('{"challenge":{}}').toString("base64url")}`, "authorization"),
      400,
      "malformed_payment_header",
    );
  });

  it("an expired quote is 402 quote_expired without a challenge; an unknown one is 404", async () => {
    const { quoteId, required } = await quoted();
    const payload = await signedPayload(buyer, required);
    await db()("quotes")
      .where({ id: quoteId })
      .update({ expires_at: db().raw("now() - interval '1 second'") });
    const res = await expectRefused(() => execute(quoteId, payload), 402, "quote_expired");
    expect(res.headers.get("payment-required")).toBeNull();
    const unknown = await execute("00000000-0000-4000-8000-000000000000");
    expect(unknown.status).toBe(404);
  });

  it("a replayed payment is 402 nonce_already_used, naming the call it paid; a paid quote is 402 quote_already_paid", async () => {
    const { quoteId, required } = await quoted();
    const payload = await signedPayload(buyer, required);
    const first = await execute(quoteId, payload);
    expect(first.status).toBe(200);
    const again = await expectRefused(() => execute(quoteId, payload), 402, "nonce_already_used");
    expect(again.body.error.details.invocation_id).toBe(first.body.invocation_id);
    await expectRefused(() => execute(quoteId), 402, "quote_already_paid");
    // The same authorization presented for another quote of the same price.
    const other = await quoted();
    const replay = {
      ...payload,
      accepted: { ...payload.accepted, extra: { ...payload.accepted.extra, quote_id: other.quoteId } },
    };
    await expectRefused(() => execute(other.quoteId, replay), 402, "nonce_already_used");
  });

  it("an authorization already consumed on chain is 402 nonce_already_used", async () => {
    const { quoteId, required } = await quoted();
    const wallet = await chain.newWallet({ usdcMicros: 100_000n });
    const accepted = required.accepts[0]!;
    const { authorization, signature } = await signTransferAuthorization({
      account: wallet.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: accepted.payTo as `0x${string}`,
      valueMicros: 50_000n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + 300),
    });
    // Anyone may submit an EIP-3009 authorization: here the payer's own wallet does, before paying us.
    const sender = localWalletClient(chain, wallet.account);
    const hash = await sender.writeContract({
      address: chain.tokenAddress,
      abi: (await import("../../shared/chain/test-token-artifact.js")).TEST_TOKEN_ABI,
      functionName: "transferWithAuthorization",
      args: [
        authorization.from,
        authorization.to,
        authorization.value,
        authorization.validAfter,
        authorization.validBefore,
        authorization.nonce,
        signature,
      ],
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    const payload: PaymentPayload = {
      x402Version: 2,
      accepted,
      payload: {
        signature,
        authorization: {
          from: authorization.from,
          to: authorization.to,
          value: authorization.value.toString(),
          validAfter: authorization.validAfter.toString(),
          validBefore: authorization.validBefore.toString(),
          nonce: authorization.nonce,
        },
      },
    };
    await expectRefused(() => execute(quoteId, payload), 402, "nonce_already_used");
  });
});

describe("concurrency and failures", () => {
  it("concurrent retries with the same payment run and settle once; the others name the paid call", async () => {
    const { quoteId, required } = await quoted();
    const payer = await x402Buyer(chain, 200_000n);
    const payload = await signedPayload(payer, required);
    const answers = await Promise.all([1, 2, 3, 4].map(() => execute(quoteId, payload)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 402, 402, 402]);
    const won = answers.find((r) => r.status === 200)!;
    for (const lost of answers.filter((r) => r.status === 402)) {
      expect(lost.body.error.details).toMatchObject({
        reason: "nonce_already_used",
        invocation_id: won.body.invocation_id,
      });
    }
    expect(await db()("x402_payments").where({ quote_id: quoteId })).toHaveLength(1);
    expect(
      await db()("invocations").where({ payer_address: payer.wallet.address.toLowerCase() }),
    ).toHaveLength(1);
    const txs = await db()("chain_transactions").where({
      purpose: "x402_settlement",
      subject_id: won.body.payment.payment_id,
    });
    expect(txs).toHaveLength(1);
    expect(await usdcBalance(chain, payer.wallet.address)).toBe(150_000n);
  });

  it("a failing seller is never settled: 502, the payment is voided, the buyer keeps the money", async () => {
    const { quoteId, required } = await quoted(brokenSeller.url);
    const payer = await x402Buyer(chain, 100_000n);
    const res = await execute(quoteId, await signedPayload(payer, required));
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({
      code: "PROVIDER_FAILED",
      details: { charged: false, settlement: "none" },
    });
    expect(res.headers.get("payment-response")).toBeNull();
    const payment = await db()("x402_payments").where({ quote_id: quoteId }).first();
    expect(payment).toMatchObject({ status: "voided", tx_hash: null });
    expect(await db()("chain_transactions").where({ subject_id: payment.id })).toHaveLength(0);
    const status = await api("GET", `/api/x402/status/${payment.invocation_id}`);
    expect(status.body.settlement).toMatchObject({ state: "voided", transaction: null });
    expect(await usdcBalance(chain, payer.wallet.address)).toBe(100_000n);
  });
});

describe("the gate", () => {
  it("closed: every paid route answers 503 before any challenge or signature check; discovery still answers", async () => {
    const listing = await buildListing({ endpointUrl: okSeller.url, price: 0.05 });
    const { quoteId, required } = await quoted();
    const payload = await signedPayload(buyer, required);
    await setCustody(true, "test freeze", "x402-gate-test");
    try {
      const sends: [string, () => Promise<ApiResponse>][] = [
        ["match", () => api("GET", `/api/x402/execute/match?task=${listing.slug}`)],
        ["execute", () => execute(quoteId)],
        ["execute+payment", () => execute(quoteId, payload)],
        ["invoke", () => api("POST", `/api/x402/invoke/${listing.id}`, { body: { input: {} } })],
      ];
      for (const [name, send] of sends) {
        const before = await x402RowCounts();
        const [quotes] = await db()("quotes").count({ n: "*" });
        const res = await send();
        expect(res.status, name).toBe(503);
        expect(res.body.error, name).toMatchObject({
          code: "TEMPORARILY_UNAVAILABLE",
          details: { reason: "platform_custody_frozen" },
        });
        expect(res.headers.get("payment-required"), name).toBeNull();
        expect(res.headers.get("www-authenticate"), name).toBeNull();
        expect(await x402RowCounts(), name).toEqual(before);
        expect((await db()("quotes").count({ n: "*" }))[0]!.n, name).toBe(quotes!.n);
      }
      const market = await api("GET", "/api/x402/marketplace");
      expect(market.status).toBe(200);
      expect(market.body.paid_execution).toMatchObject({ enabled: false, reason: "platform_custody_frozen" });
      expect((await api("GET", "/api/x402/listings")).status).toBe(200);
    } finally {
      await setCustody(false, "test unfreeze", "x402-gate-test");
    }
  });
});
