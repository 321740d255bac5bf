import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { PaymentRequired } from "@x402/core/types";
import type { Worker } from "bullmq";
import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { canonicalJson, formatWwwAuthenticate } from "../../shared/x402/mpp.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { mppAuthorization, usdcBalance, type X402Buyer, x402Buyer } from "../helpers/x402.js";

// Paid calls over MCP on a real local chain (docs/mcp.md "Paid calls over MCP"): a 2026-07-28 client
// gets the x402 tool-result binding and pays with the official x402 client's payload in _meta; a
// 2025-11-25 client gets JSON-RPC -32042 with MPP challenges and pays with a credential in _meta; the
// payment_signature argument works as an alias. Each settles on chain for exactly the price, and a
// replayed payment is refused. Own database: the settlement worker must only see this file's payments.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let settlements: Worker;
let seller: TestSeller;
let sellerAgent: TestAgent;
let platform: Address;
let url: URL;

const PRICE_MICROS = 30_000n;

const textOf = (result: { content?: unknown }) =>
  ((result.content as { text: string }[] | undefined) ?? []).map((c) => c.text).join("\n");

beforeAll(async () => {
  ownDb = await useOwnDatabase("mcppaid");
  chain = await startLocalChain();
  platform = (await usePaidChain(chain)).address;
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  sellerAgent = await buildAgent("seller");
  url = new URL(`http://127.0.0.1:${getConfig().port}/mcp`);
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

async function paidListing() {
  return buildListing({
    endpointUrl: seller.url,
    price: Number(PRICE_MICROS) / 1e6,
    sellerId: sellerAgent.agentId,
  });
}

async function settledOnChain(buyer: X402Buyer, before: bigint, listingId: string) {
  const settled = await db()("x402_payments").where({ listing_id: listingId }).first();
  expect(settled?.status).toBe("settled");
  expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before - PRICE_MICROS);
  return settled;
}

describe("a 2026-07-28 client (x402 tool-result binding)", () => {
  it("is answered the PaymentRequired, pays with _meta x402/payment, gets the result and the settlement; a replay is refused", async () => {
    const client = new ClientV2(
      { name: "paid-v2", version: "2.0.0" },
      { versionNegotiation: { mode: "auto" } },
    );
    await client.connect(new TransportV2(url));
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { listing_id: listing.id, input: { q: "hi" } };
      const unpaid = await client.callTool({ name: "agentmarket_call_service", arguments: args });
      expect(unpaid.isError).toBe(true);
      const required = unpaid.structuredContent as unknown as PaymentRequired;
      expect(required).toMatchObject({
        x402Version: 2,
        accepts: [{ amount: String(PRICE_MICROS), payTo: platform }],
      });
      const payload = await buyer.client.createPaymentPayload(required);
      const paid = await client.callTool({
        name: "agentmarket_call_service",
        arguments: args,
        _meta: { "x402/payment": payload },
      });
      expect(paid.isError, JSON.stringify(paid.content)).toBeFalsy();
      expect(paid.structuredContent).toMatchObject({ success: true, output: { got: { q: "hi" } } });
      expect(paid._meta?.["x402/payment-response"]).toMatchObject({
        success: true,
        transaction: expect.stringMatching(/^0x/),
      });
      await settledOnChain(buyer, before, listing.id);
      const replay = await client.callTool({
        name: "agentmarket_call_service",
        arguments: args,
        _meta: { "x402/payment": payload },
      });
      expect(replay.isError).toBe(true);
      expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before - PRICE_MICROS);
    } finally {
      await client.close();
    }
  });
});

describe("a paid call whose seller fails", () => {
  it("is an error with no output, and the payment is voided, never settled", async () => {
    const broken = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
    const client = new ClientV2(
      { name: "paid-fail", version: "2.0.0" },
      { versionNegotiation: { mode: "auto" } },
    );
    await client.connect(new TransportV2(url));
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await buildListing({
        endpointUrl: broken.url,
        price: Number(PRICE_MICROS) / 1e6,
        sellerId: sellerAgent.agentId,
      });
      const args = { listing_id: listing.id, input: {} };
      const unpaid = await client.callTool({ name: "agentmarket_call_service", arguments: args });
      const payload = await buyer.client.createPaymentPayload(
        unpaid.structuredContent as unknown as PaymentRequired,
      );
      const failed = await client.callTool({
        name: "agentmarket_call_service",
        arguments: args,
        _meta: { "x402/payment": payload },
      });
      expect(failed.isError).toBe(true);
      expect(failed._meta?.["x402/payment-response"]).toBeUndefined();
      expect((await db()("x402_payments").where({ listing_id: listing.id }).first())?.status).toBe("voided");
      expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before);
    } finally {
      await client.close();
      await broken.close();
    }
  });
});

describe("a 2025-11-25 client (MPP JSON-RPC binding)", () => {
  it("gets -32042 with challenges, pays with _meta org.paymentauth/credential and gets the receipt in _meta", async () => {
    const client = new ClientV1({ name: "paid-v1", version: "1.0.0" });
    await client.connect(new TransportV1(url));
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { listing_id: listing.id, input: { q: "mpp" } };
      const error = await client
        .callTool({ name: "agentmarket_call_service", arguments: args })
        .catch((e) => e);
      expect(error.code).toBe(-32042);
      expect(error.data.httpStatus).toBe(402);
      const challenge = error.data.challenges[0];
      expect(challenge).toMatchObject({
        method: "evm",
        intent: "charge",
        request: { amount: String(PRICE_MICROS) },
      });
      expect(error.data.x402).toMatchObject({ x402Version: 2 });
      // The credential answers the challenge as received (request in native JSON, as the transport has it).
      const header = formatWwwAuthenticate({
        ...challenge,
        request: Buffer.from(canonicalJson(challenge.request)).toString("base64url"),
      });
      const authorization = await mppAuthorization(chain, buyer.wallet, header);
      const credential = JSON.parse(
        Buffer.from(authorization.slice("Payment ".length), "base64url").toString("utf8"),
      );
      credential.challenge = challenge;
      const paid = await client.callTool({
        name: "agentmarket_call_service",
        arguments: args,
        _meta: { "org.paymentauth/credential": credential },
      });
      expect(paid.isError, JSON.stringify(paid.content)).toBeFalsy();
      expect(paid.structuredContent).toMatchObject({ success: true, output: { got: { q: "mpp" } } });
      expect(paid._meta?.["org.paymentauth/receipt"]).toMatchObject({
        status: "success",
        method: "evm",
        challengeId: challenge.id,
      });
      await settledOnChain(buyer, before, listing.id);
    } finally {
      await client.close();
    }
  });

  it("answers a credential the edge refuses with -32043, the challenges again and the refusal; nothing is charged", async () => {
    const client = new ClientV1({ name: "paid-v1-refused", version: "1.0.0" });
    await client.connect(new TransportV1(url));
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { listing_id: listing.id, input: { q: "refused" } };
      const first = await client
        .callTool({ name: "agentmarket_call_service", arguments: args })
        .catch((e) => e);
      const challenge = first.data.challenges[0];
      const header = formatWwwAuthenticate({
        ...challenge,
        request: Buffer.from(canonicalJson(challenge.request)).toString("base64url"),
      });
      const authorization = await mppAuthorization(chain, buyer.wallet, header);
      const credential = JSON.parse(
        Buffer.from(authorization.slice("Payment ".length), "base64url").toString("utf8"),
      );
      credential.challenge = challenge;
      // Signed for another amount than the challenge asks: the edge refuses it.
      credential.payload.value = "1";
      const refused = await client
        .callTool({
          name: "agentmarket_call_service",
          arguments: args,
          _meta: { "org.paymentauth/credential": credential },
        })
        .catch((e) => e);
      expect(refused.code, JSON.stringify(refused).slice(0, 800)).toBe(-32043);
      expect(refused.data.challenges).toHaveLength(1);
      expect(refused.data.problem.error.code).toBe("PAYMENT_REQUIRED");
      expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before);
      expect(await db()("x402_payments").where({ listing_id: listing.id }).first()).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it("takes payment_signature as an argument (the alias agents of a hosted peer send)", async () => {
    const client = new ClientV1({ name: "paid-v1-alias", version: "1.0.0" });
    await client.connect(new TransportV1(url));
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { listing_id: listing.id, input: { q: "alias" } };
      const error = await client
        .callTool({ name: "agentmarket_call_service", arguments: args })
        .catch((e) => e);
      const payload = await buyer.client.createPaymentPayload(error.data.x402);
      const signature = Buffer.from(JSON.stringify(payload)).toString("base64");
      const paid = await client.callTool({
        name: "agentmarket_call_service",
        arguments: { ...args, payment_signature: signature },
      });
      expect(paid.isError, JSON.stringify(paid.content)).toBeFalsy();
      expect(paid._meta?.["x402/payment-response"]).toMatchObject({ success: true });
      await settledOnChain(buyer, before, listing.id);
    } finally {
      await client.close();
    }
  });
});

describe("the bridge from a keyed call the balance cannot pay", () => {
  it("invoke on a 2026-07-28 client: the x402 challenge for the same call, then the paid retry", async () => {
    const agent = await buildAgent();
    const client = new ClientV2(
      { name: "bridge-v2", version: "2.0.0" },
      { versionNegotiation: { mode: "auto" } },
    );
    await client.connect(
      new TransportV2(url, { requestInit: { headers: { authorization: `Bearer ${agent.apiKey}` } } }),
    );
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { listing_id: listing.id, input: { q: "bridged" }, max_cost: 1 };
      const unpaid = await client.callTool({ name: "agentmarket_invoke", arguments: args });
      expect(unpaid.isError).toBe(true);
      expect(textOf(unpaid)).toMatch(/^Your balance cannot pay this call/);
      const required = unpaid.structuredContent as unknown as PaymentRequired;
      expect(required).toMatchObject({ x402Version: 2, accepts: [{ amount: String(PRICE_MICROS) }] });
      const payload = await buyer.client.createPaymentPayload(required);
      const paid = await client.callTool({
        name: "agentmarket_invoke",
        arguments: args,
        _meta: { "x402/payment": payload },
      });
      expect(paid.isError, textOf(paid)).toBeFalsy();
      expect(paid.structuredContent).toMatchObject({ success: true, output: { got: { q: "bridged" } } });
      await settledOnChain(buyer, before, listing.id);
    } finally {
      await client.close();
    }
  });

  it("execute on a 2025-11-25 client: -32042 for the task's quote, paid with the payment_signature alias", async () => {
    const agent = await buildAgent();
    const client = new ClientV1({ name: "bridge-v1", version: "1.0.0" });
    await client.connect(
      new TransportV1(url, { requestInit: { headers: { authorization: `Bearer ${agent.apiKey}` } } }),
    );
    try {
      const buyer = await x402Buyer(chain, 1_000_000n);
      const before = await usdcBalance(chain, buyer.wallet.address);
      const listing = await paidListing();
      const args = { task: listing.slug, input: { q: "task" }, constraints: { max_cost: 1 } };
      const error = await client.callTool({ name: "agentmarket_execute", arguments: args }).catch((e) => e);
      expect(error.code).toBe(-32042);
      expect(error.data.x402.accepts[0].extra.quote_id).toEqual(expect.any(String));
      const payload = await buyer.client.createPaymentPayload(error.data.x402);
      const signature = Buffer.from(JSON.stringify(payload)).toString("base64");
      const paid = await client.callTool({
        name: "agentmarket_execute",
        arguments: { ...args, payment_signature: signature },
      });
      expect(paid.isError, JSON.stringify(paid.content)).toBeFalsy();
      expect(paid.structuredContent).toMatchObject({ success: true, output: { got: { q: "task" } } });
      await settledOnChain(buyer, before, listing.id);
    } finally {
      await client.close();
    }
  });
});
