import { afterAll, beforeAll, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { processExecution } from "../../workers/executions.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { encodePayload, paymentRequiredOf, signedPayload, usdcBalance, x402Buyer } from "../helpers/x402.js";

// An x402 call that waited in the queue until its payment authorization is about to lapse is not made:
// the seller would work and the settlement could never be submitted. It is voided, nothing is charged.

let chain: LocalChain;
let service: TestService;
let seller: TestSeller;

beforeAll(async () => {
  chain = await startLocalChain();
  await usePaidChain(chain);
  // No executions worker and no wait: the paid call stays queued until this test runs it by hand.
  overrideConfig({ executeSyncWaitMs: 0 });
  service = await startService({ worker: false, sweeper: false });
  seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { done: true } }));
});

afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
});

it("a queued x402 call whose authorization lapses too soon is voided without calling the seller", async () => {
  const sellerAgent = await buildAgent("seller");
  const listing = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });
  const buyer = await x402Buyer(chain, 1_000_000n);
  const challenge = await api("POST", `/api/x402/invoke/${listing.id}`, { body: { input: {} } });
  expect(challenge.status).toBe(402);
  const payload = await signedPayload(buyer, paymentRequiredOf(challenge));
  const accepted = await api("POST", `/api/x402/invoke/${listing.id}`, {
    body: { input: {} },
    headers: { "payment-signature": encodePayload(payload) },
  });
  expect(accepted.status).toBe(202);
  const invocationId = accepted.body.invocation_id as string;

  // The job waited in the queue: only 20 s of the authorization are left.
  await db()("x402_payments")
    .where({ invocation_id: invocationId })
    .update({ valid_before: Math.floor(Date.now() / 1000) + 20 });
  expect(await processExecution({ invocation_id: invocationId })).toBe("failed");

  expect(seller.calls).toHaveLength(0);
  const payment = await db()("x402_payments").where({ invocation_id: invocationId }).first();
  expect(payment.status).toBe("voided");
  const invocation = await db()("invocations").where({ id: invocationId }).first();
  expect(invocation.error.code).toBe("TIMEOUT");
  expect(await usdcBalance(chain, buyer.wallet.address)).toBe(1_000_000n);
});
