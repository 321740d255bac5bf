import { decodePaymentResponseHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import { x402HTTPClient } from "@x402/fetch";
import type { Worker } from "bullmq";
import { type Address, getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import { getQueue } from "../../shared/queues.js";
import { parseWwwAuthenticate } from "../../shared/x402/mpp.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, signTransferAuthorization, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { mppAuthorization, paymentRequiredOf, usdcBalance, x402Buyer } from "../helpers/x402.js";

// The x402 gateway end to end on a real local chain: the official @x402/fetch client pays, an MPP
// credential pays, the settlement-confirmations worker submits and confirms transferWithAuthorization,
// and the buyer's and platform's on-chain balances and the ledger (97 / 3) all agree. Own database: the
// settlement worker and the sweeper must only ever see this file's payments.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let settlements: Worker;
let seller: TestSeller;
let sellerAgent: TestAgent;
let platform: Address;

const base = () => `http://127.0.0.1:${getConfig().port}`;
const INPUT_SCHEMA = { type: "object", required: ["q"], properties: { q: { type: "string" } } };

async function revenue(): Promise<bigint> {
  return (await platformAccount("platform_revenue", "USDC")).balance_micros;
}

async function evidenceStates(paymentId: string): Promise<string[]> {
  const rows = await db()("payment_evidence").where({ subject_type: "x402_payment", subject_id: paymentId });
  return rows.map((r) => r.state).sort();
}

beforeAll(async () => {
  ownDb = await useOwnDatabase("x402gw");
  chain = await startLocalChain();
  platform = (await usePaidChain(chain)).address;
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { answer: call.body.input } }),
  );
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

describe("the 402 challenge", () => {
  it("carries PAYMENT-REQUIRED (x402 v2 with quote_id and bazaar), WWW-Authenticate: Payment and a body for people", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.05,
      sellerId: sellerAgent.agentId,
      inputSchema: INPUT_SCHEMA,
    });
    const res = await api("POST", `/api/x402/invoke/${listing.id}`, { body: { input: { q: "hi" } } });
    expect(res.status).toBe(402);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const required = paymentRequiredOf(res);
    const quoteId = required.accepts[0]!.extra.quote_id as string;
    expect(required).toMatchObject({
      x402Version: 2,
      resource: {
        url: `${getConfig().publicBaseUrl}/api/x402/invoke/${listing.id}`,
        mimeType: "application/json",
      },
      accepts: [
        {
          scheme: "exact",
          network: `eip155:${chain.chainId}`,
          amount: "50000",
          asset: getAddress(chain.tokenAddress),
          payTo: platform,
          maxTimeoutSeconds: 300,
          extra: { name: "USD Coin", version: "2", quote_id: quoteId },
        },
      ],
    });
    const bazaar = required.extensions?.bazaar as {
      info: { input: Record<string, unknown> };
      schema: unknown;
    };
    expect(bazaar.info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" });
    expect(JSON.stringify(bazaar.schema)).toContain('"required":["q"]');

    const challenge = parseWwwAuthenticate(res.headers.get("www-authenticate")!);
    expect(challenge).toMatchObject({
      method: "evm",
      intent: "charge",
      realm: new URL(getConfig().publicBaseUrl).host,
    });
    const request = JSON.parse(Buffer.from(challenge!.request, "base64url").toString("utf8"));
    expect(request).toMatchObject({
      amount: "50000",
      currency: getAddress(chain.tokenAddress),
      recipient: platform,
      externalId: quoteId,
      methodDetails: { chainId: chain.chainId, credentialTypes: ["authorization"] },
    });
    expect(res.body.error).toMatchObject({
      code: "PAYMENT_REQUIRED",
      details: { reason: "payment_required" },
    });
    expect(res.body.error.details.quote).toMatchObject({ quote_id: quoteId, amount_atomic: "50000" });
    expect(res.body.error.details.x402.accepts[0].amount).toBe("50000");
  });

  it("validates the input against the listing's schema before any challenge (400)", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, price: 0.05, inputSchema: INPUT_SCHEMA });
    const res = await api("POST", `/api/x402/invoke/${listing.id}`, { body: { input: { q: 1 } } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations[0].path).toBe("/input/q");
    expect(res.headers.get("payment-required")).toBeNull();
    expect(await db()("quotes").where({ listing_id: listing.id })).toHaveLength(0);
  });
});

describe("a real x402 client pays on the local chain", () => {
  it("match → execute: 402, signed retry, 200 with PAYMENT-RESPONSE; chain, ledger and evidence agree", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.05,
      sellerId: sellerAgent.agentId,
      inputSchema: INPUT_SCHEMA,
    });
    const match = await api("GET", `/api/x402/execute/match?task=${listing.slug}`);
    expect(match.status).toBe(200);
    expect(match.body).toMatchObject({
      requires_payment: true,
      amount_atomic: "50000",
      amount_usdc: "0.050000",
      pay_to: platform,
      network: `eip155:${chain.chainId}`,
      listing: { listing_id: listing.id },
    });
    const buyer = await x402Buyer(chain, 1_000_000n);
    const before = {
      buyer: await usdcBalance(chain, buyer.wallet.address),
      platform: await usdcBalance(chain, platform),
      payable: (await balances(sellerAgent.agentId, "USDC")).payable,
      revenue: await revenue(),
    };

    const res = await buyer.pay(`${base()}/api/x402/execute`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ quote_id: match.body.quote_id, input: { q: "hello" } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.output).toEqual({ answer: { q: "hello" } });
    expect(body.settlement).toMatchObject({ state: "confirmed", amount_atomic: "50000" });
    expect(body.settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    const settle = new x402HTTPClient(buyer.client).getPaymentSettleResponse((h) => res.headers.get(h));
    expect(settle).toMatchObject({
      success: true,
      transaction: body.settlement.transaction,
      network: `eip155:${chain.chainId}`,
    });

    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before.buyer - 50_000n);
    expect(await usdcBalance(chain, platform)).toBe(before.platform + 50_000n);
    expect((await balances(sellerAgent.agentId, "USDC")).payable - before.payable).toBe(48_500n);
    expect((await revenue()) - before.revenue).toBe(1_500n);
    expect(await evidenceStates(body.payment.payment_id)).toEqual(
      ["authorization", "challenge", "confirmation", "execution", "outcome", "settlement"].sort(),
    );

    const status = await api("GET", `/api/x402/status/${body.invocation_id}`);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      status: "succeeded",
      settlement: { state: "confirmed" },
      payment: { status: "settled" },
    });
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: body.settlement.transaction });
    expect(status.body.settlement.block_number).toBe(receipt.blockNumber.toString());
  });

  it("invoke by listing id: the challenge's implicit quote is paid once; first-party listings book all to revenue", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, price: 0.02 });
    const buyer = await x402Buyer(chain, 100_000n);
    const revenueBefore = await revenue();
    const res = await buyer.pay(`${base()}/api/x402/invoke/${listing.id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: { n: 1 } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.provider.listing_id).toBe(listing.id);
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(80_000n);
    expect((await revenue()) - revenueBefore).toBe(20_000n);
    const quote = await db()("quotes").where({ id: body.payment.quote_id }).first();
    expect(quote).toMatchObject({ listing_id: listing.id, invocation_id: body.invocation_id });
    expect(quote.used_at).not.toBeNull();
  });
});

describe("the other x402 headers", () => {
  it("X-PAYMENT with an x402 v1 payload pays and gets X-PAYMENT-RESPONSE; X-PAYMENT-SIGNATURE is the v2 alias", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, price: 0.01 });
    const wallet = await chain.newWallet({ usdcMicros: 100_000n });
    const { authorization, signature } = await signTransferAuthorization({
      account: wallet.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: platform,
      valueMicros: 10_000n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + 300),
    });
    const v1 = {
      x402Version: 1,
      scheme: "exact",
      network: `eip155:${chain.chainId}`,
      payload: {
        signature,
        authorization: {
          ...authorization,
          value: authorization.value.toString(),
          validAfter: authorization.validAfter.toString(),
          validBefore: authorization.validBefore.toString(),
        },
      },
    };
    const res = await api("POST", `/api/x402/invoke/${listing.id}`, {
      body: { input: {} },
      headers: { "x-payment": Buffer.from(JSON.stringify(v1)).toString("base64") },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.payment.protocol).toBe("x402v1");
    expect(decodePaymentResponseHeader(res.headers.get("x-payment-response")!).transaction).toBe(
      res.body.settlement.transaction,
    );
    expect(await usdcBalance(chain, wallet.address)).toBe(90_000n);

    const buyer = await x402Buyer(chain, 100_000n);
    const first = await api("POST", `/api/x402/invoke/${listing.id}`, { body: { input: {} } });
    const payload = await buyer.client.createPaymentPayload(paymentRequiredOf(first));
    const alias = await api("POST", `/api/x402/invoke/${listing.id}`, {
      body: { input: {} },
      headers: { "x-payment-signature": encodePaymentSignatureHeader(payload) },
    });
    expect(alias.status).toBe(200);
    expect(alias.body.payment).toMatchObject({
      protocol: "x402v2",
      quote_id: payload.accepted.extra.quote_id,
    });
    expect(alias.headers.get("payment-response")).not.toBeNull();
  });
});

describe("MPP (Authorization: Payment)", () => {
  it("a hand-built EIP-3009 credential bound to the challenge pays; Payment-Receipt names the transaction", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.03,
      sellerId: sellerAgent.agentId,
    });
    const match = await api("GET", `/api/x402/execute/match?task=${listing.slug}`);
    const first = await api("POST", "/api/x402/execute", {
      body: { quote_id: match.body.quote_id, input: {} },
    });
    expect(first.status).toBe(402);
    const buyer = await chain.newWallet({ usdcMicros: 100_000n });
    const authorization = await mppAuthorization(chain, buyer, first.headers.get("www-authenticate")!);

    const paid = await api("POST", "/api/x402/execute", {
      body: { quote_id: match.body.quote_id, input: {} },
      headers: { authorization },
    });
    expect(paid.status).toBe(200);
    expect(paid.body.payment.protocol).toBe("mpp");
    const receipt = JSON.parse(
      Buffer.from(paid.headers.get("payment-receipt")!, "base64url").toString("utf8"),
    );
    expect(receipt).toMatchObject({
      status: "success",
      method: "evm",
      intent: "charge",
      externalId: match.body.quote_id,
      reference: paid.body.settlement.transaction,
    });
    expect(paid.headers.get("payment-response")).not.toBeNull();
    expect(await usdcBalance(chain, buyer.address)).toBe(70_000n);
  });

  it("refuses a credential whose nonce is not bound to the challenge (402, nothing moves)", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, price: 0.03 });
    const match = await api("GET", `/api/x402/execute/match?task=${listing.slug}`);
    const first = await api("POST", "/api/x402/execute", {
      body: { quote_id: match.body.quote_id, input: {} },
    });
    const buyer = await chain.newWallet({ usdcMicros: 100_000n });
    const authorization = await mppAuthorization(chain, buyer, first.headers.get("www-authenticate")!, {
      nonce: `0x${"11".repeat(32)}`,
    });
    const res = await api("POST", "/api/x402/execute", {
      body: { quote_id: match.body.quote_id, input: {} },
      headers: { authorization },
    });
    expect(res.status).toBe(402);
    expect(res.body.error.details.reason).toBe("mpp_nonce_not_bound_to_challenge");
    expect(await usdcBalance(chain, buyer.address)).toBe(100_000n);
  });
});

describe("discovery", () => {
  it("lists payable listings in /discover, /.well-known/x402 and OpenAPI x-payment-info", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, price: 0.04, inputSchema: INPUT_SCHEMA });
    const discover = await api("GET", "/api/x402/discover?limit=100");
    expect(discover.status).toBe(200);
    const item = discover.body.items.find((i: { resource: string }) => i.resource.endsWith(listing.id));
    expect(item).toMatchObject({
      type: "http",
      x402Version: 2,
      accepts: [{ amount: "40000", scheme: "exact" }],
    });
    expect(item.extensions.bazaar.info.input.method).toBe("POST");
    const wellKnown = await api("GET", "/.well-known/x402");
    expect(wellKnown.body.version).toBe(1);
    expect(wellKnown.body.resources).toContain(`${getConfig().publicBaseUrl}/api/x402/invoke/${listing.id}`);
    const card = await api("GET", "/.well-known/x402/service.json");
    expect(card.body.protocols.map((p: { name: string }) => p.name)).toEqual(["x402", "x402", "mpp"]);
    expect(card.body.paid_execution.enabled).toBe(true);
    const detail = await api("GET", `/api/x402/invoke/${listing.id}`);
    expect(detail.body).toMatchObject({
      price_atomic: "40000",
      payable_now: true,
      accepts: [{ amount: "40000" }],
    });
    const openapi = await api("GET", "/openapi.json");
    expect(openapi.body.paths["/api/x402/execute"].post["x-payment-info"]).toMatchObject({
      protocols: ["x402", "mpp"],
    });
    expect(openapi.body.paths["/api/x402/execute"].post.responses["402"]).toBeDefined();
    const none = await api("GET", "/api/x402/invoke");
    expect(none.status).toBe(404);
    expect(none.body.error.details.catalog).toBe("/api/x402/listings");
    const echo = await api("GET", "/api/x402/test/echo?message=hi");
    expect(echo.body.output.echo).toEqual({ message: "hi" });
  });
});
