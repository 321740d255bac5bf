import { UnrecoverableError, Worker } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { createRedis } from "../../shared/redis.js";
import { redriveX402Settlements } from "../../shared/x402/payments.js";
import { processX402Settlement } from "../../shared/x402/settlement.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { x402Buyer } from "../helpers/x402.js";

// Found by the chaos run (docs/reliability.md "Chaos"): an x402 payment whose call succeeded is
// `settling`, and only its settlement-confirmations job takes it to the chain. When the queue failed that
// job for good (its worker killed twice while holding it), nothing drove the payment again: it stayed
// settling until its authorization expired, and the seller was never paid for the work. The recovery
// sweep re-drives it. Own database: the sweep reads every open payment.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("x402redrive");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ x402SettlementWaitMs: 0 });
  service = await startService();
  seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { done: true } }));
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

it("re-drives a settling payment whose settlement job the queue failed for good, and it settles once", async () => {
  const listing = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });
  const buyer = await x402Buyer(chain, 100_000n);
  const res = await buyer.pay(`http://127.0.0.1:${getConfig().port}/api/x402/invoke/${listing.id}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: {} }),
  });
  expect(res.status).toBe(200);
  const paymentId = ((await res.json()) as any).payment.payment_id as string;
  const queue = getQueue("settlement-confirmations");
  await waitFor("the settlement job", async () => (await queue.getJobState(paymentId)) === "waiting");

  // The job fails for good in a worker that dies with it: no handler of ours ever sees it.
  const bare = new Worker(
    "settlement-confirmations",
    async () => {
      throw new UnrecoverableError("job stalled more than allowable limit");
    },
    { connection: createRedis("worker"), prefix: getConfig().queuePrefix },
  );
  try {
    await waitFor("the job to fail", async () => (await queue.getJobState(paymentId)) === "failed");
  } finally {
    await bare.close();
  }
  const payment = () => db()("x402_payments").where({ id: paymentId }).first();
  expect((await payment()).status).toBe("settling");

  // Young payments are left to their own job; an old one is driven again.
  expect(await redriveX402Settlements()).toBe(0);
  await db()("x402_payments")
    .where({ id: paymentId })
    .update({ updated_at: db().raw("now() - interval '1 minute'") });
  expect(await redriveX402Settlements()).toBe(1);
  expect(await queue.getJobState(paymentId)).toBe("waiting");
  expect(await redriveX402Settlements()).toBe(0);

  // What the re-driven job runs: the payment goes to the chain and settles, with one transaction.
  await waitFor(
    "the payment to settle",
    async () => (await processX402Settlement(paymentId)).status === "settled",
    20_000,
  );
  expect((await payment()).status).toBe("settled");
  const txs = await db()("chain_transactions").where({ purpose: "x402_settlement", subject_id: paymentId });
  expect(txs).toHaveLength(1);
});
