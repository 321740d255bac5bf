import { spawn } from "node:child_process";
import type { Worker } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { setDevChain } from "../../shared/chain/dev-chain.js";
import { overrideConfig } from "../../shared/config.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";

// The README's paid-call walkthrough (and docs/payments.md's) is examples/paid-call.mjs; this runs it, unchanged, against the
// service in DEV_CHAIN mode (dev routes on, a local chain as the rail), so the README cannot rot.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let settlements: Worker;

beforeAll(async () => {
  ownDb = await useOwnDatabase("example");
  chain = await startLocalChain({ intervalMiningMs: 500 });
  await usePaidChain(chain, { confirmations: 2 });
  overrideConfig({ devChain: true });
  setDevChain(chain);
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
});

afterAll(async () => {
  setDevChain(undefined);
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

it("examples/paid-call.mjs reaches a paid call with a receipt, from nothing", async () => {
  const child = spawn(process.execPath, ["examples/paid-call.mjs"], {
    env: { ...process.env, AGENTMARKET_URL: service.baseUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  expect(code, output).toBe(0);
  const last = JSON.parse(output.trim().split("\n").at(-1)!);
  expect(last).toMatchObject({ ok: true, amount_usdc: "0.250000" });
  expect(output).toContain("seller_share_usdc");
}, 90_000);
