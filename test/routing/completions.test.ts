import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { db } from "../../shared/db/knex.js";
import { dbStatementsPipelined } from "../../shared/observability/metrics.js";
import { executeResult } from "../../shared/routing/index.js";
import { findInvocationSummary } from "../../shared/routing/store/invocations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { fundedAgent } from "../helpers/money.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The worker hands a free call's committed summary, and a ledger-paid call's once its transaction has
// committed, to the request waiting in the same process (shared/routing/completions.ts). The answer must
// be exactly the one a read of the row gives.

const taken = vi.hoisted(() => ({ hits: 0, misses: 0 }));
vi.mock("../../shared/routing/completions.js", async (original) => {
  const real = await original<typeof import("../../shared/routing/completions.js")>();
  return {
    ...real,
    takeCompletion: (id: string) => {
      const summary = real.takeCompletion(id);
      if (summary) taken.hits++;
      else taken.misses++;
      return summary;
    },
  };
});

let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let buyer: TestAgent;

beforeAll(async () => {
  // A live paid gate for the paid case: a local chain as the settlement rail (custody is open).
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  seller = await startSeller((call, res) => json(res, 200, { success: true, output: { got: call.body } }));
  buyer = await buildAgent();
});
afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
});

describe("in-process completions", () => {
  it("answer a free execute from the worker's summary, equal to the answer the row gives", async () => {
    for (let i = 0; i < 5; i++) {
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: "echo", input: { message: `hi ${i}` } },
      });
      expect(res.status).toBe(200);
      const fromRow = executeResult((await findInvocationSummary(db(), res.body.invocation_id))!);
      expect(res.body).toEqual(JSON.parse(JSON.stringify(fromRow)));
    }
    expect(taken.hits).toBe(5);
  });

  it("answer a ledger-paid call from its committed summary, equal to the answer the row gives", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.01,
      sellerId: (await buildAgent("seller")).agentId,
    });
    const payer = await fundedAgent(1);
    const paidCall = (i: number) =>
      api("POST", `/api/invoke/${listing.id}`, { key: payer.apiKey, body: { input: { i } } });
    // The first call makes the buyer's held account and the seller's payable one (the ledger's first use).
    expect((await paidCall(-1)).status).toBe(200);
    const before = taken.hits;
    const pipelinedBefore = (await dbStatementsPipelined.get()).values[0]?.value ?? 0;
    for (let i = 0; i < 3; i++) {
      const res = await paidCall(i);
      expect(res.status).toBe(200);
      expect(res.body.cost).toMatchObject({ amount_usdc: "0.010000", charged: true });
      const fromRow = executeResult((await findInvocationSummary(db(), res.body.invocation_id))!);
      expect(res.body).toEqual(JSON.parse(JSON.stringify(fromRow)));
    }
    expect(taken.hits - before).toBe(3);
    // Each sent eleven statements in another's flight (shared/db/pipeline.ts), each of its transactions
    // one flight: the hold's BEGIN, the claim behind the custody check, the hold's lock, write and key's
    // day of spend behind them, and its COMMIT; the capture's BEGIN, its lock, write and day of spend
    // behind the success record, and its COMMIT (PostTransactionInput.oneFlight; nine when each
    // transaction's write waited for its lock's answer). Other work in the process can only add to it.
    const pipelined = ((await dbStatementsPipelined.get()).values[0]?.value ?? 0) - pipelinedBefore;
    expect(pipelined).toBeGreaterThanOrEqual(3 * 11);
  });
});
