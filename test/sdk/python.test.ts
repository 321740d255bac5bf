import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { setDevChain } from "../../shared/chain/dev-chain.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { fundedAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The Python SDK (sdk/python) against the running service on a paid local chain: its unittest suite runs
// the whole flow (sdk/python/tests/test_flow.py) with a funded key and listings made here, and its wheel
// builds offline. The example agent buys a call with a funded key, and funds itself on the dev chain.

const root = fileURLToPath(new URL("../../", import.meta.url));
/** Debian's python3 (.ci/run installs it with pip, setuptools and wheel): the wheel builds offline with it. */
const PYTHON = "/usr/bin/python3";
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;
let free: ListingRow;
let paid: ListingRow;
let funded: TestAgent;
let settlements: Worker;

/**
 * A child process run without blocking this one: the service under test runs in this process, so
 * spawnSync would stop it from answering the Python client (every call would time out).
 */
function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  return new Promise<{ status: number | null; output: string }>((resolve) => {
    execFile(file, args, { cwd: root, env, encoding: "utf8", timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({
        status: error ? (typeof error.code === "number" ? error.code : null) : 0,
        output: stdout + stderr,
      });
    });
  });
}

beforeAll(async () => {
  ownDb = await useOwnDatabase("sdkpy");
  chain = await startLocalChain();
  await usePaidChain(chain);
  // DEV_CHAIN mode, as `npm start` sets it up: the faucet the example agent funds itself from.
  overrideConfig({ devChain: true });
  setDevChain(chain);
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  sellerAgent = await buildAgent("seller");
  // What the Python flow test buys from: a free listing, a paid one of another agent, a funded buyer.
  free = await buildListing({ endpointUrl: seller.url });
  paid = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });
  funded = await fundedAgent(2);
});
afterAll(async () => {
  setDevChain(undefined);
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

describe("the Python SDK", () => {
  it("runs its unittest suite, the whole flow included, against the service", async () => {
    const result = await run(PYTHON, ["-m", "unittest", "discover", "-s", "sdk/python/tests", "-v"], {
      ...process.env,
      AGENTMARKET_BASE_URL: `http://127.0.0.1:${getConfig().port}`,
      AGENTMARKET_FUNDED_KEY: funded.apiKey,
      AGENTMARKET_PAID_LISTING_ID: paid.id,
      AGENTMARKET_FREE_TASK: free.slug,
      AGENTMARKET_SELLER_URL: seller.url,
    });
    expect(result.status, result.output).toBe(0);
    expect(result.output).toMatch(/^OK$/m);
    expect(result.output, "every flow test ran").not.toMatch(/skipped/);
  }, 150_000);

  it("the example agent buys a task with a funded key and prints its receipt", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.02,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await fundedAgent(1);
    const result = await run(PYTHON, ["examples/python/agent.py", listing.slug], {
      ...process.env,
      AGENTMARKET_URL: `http://127.0.0.1:${getConfig().port}`,
      AGENTMARKET_API_KEY: buyer.apiKey,
    });
    expect(result.status, result.output).toBe(0);
    const last = JSON.parse(result.output.trim().split("\n").at(-1)!);
    expect(last).toMatchObject({ ok: true, receipt: { amount_usdc: "0.020000" } });
  }, 60_000);

  it("the example agent funds itself on the dev chain (gasless deposit), buys a task and prints its receipt", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.02,
      sellerId: sellerAgent.agentId,
    });
    const result = await run(PYTHON, ["examples/python/agent.py", listing.slug], {
      ...process.env,
      AGENTMARKET_URL: `http://127.0.0.1:${getConfig().port}`,
    });
    expect(result.status, result.output).toBe(0);
    expect(result.output).toMatch(/^funded: /m);
    const last = JSON.parse(result.output.trim().split("\n").at(-1)!);
    expect(last).toMatchObject({ ok: true, receipt: { amount_usdc: "0.020000" } });
  }, 90_000);

  it("builds a wheel offline", async () => {
    const out = mkdtempSync(join(tmpdir(), "agentmarket-wheel-"));
    const result = await run(PYTHON, [
      "-m",
      "pip",
      "wheel",
      "./sdk/python",
      "--no-deps",
      "--no-build-isolation",
      "-w",
      out,
    ]);
    expect(result.status, result.output).toBe(0);
    expect(readdirSync(out).some((f) => /^agentmarket-0\.1\.0-.*\.whl$/.test(f))).toBe(true);
  }, 120_000);
});
