import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { RECOVERY_GRACE_SECONDS } from "../../shared/routing/recovery.js";
import { listAttempts } from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// A run in the submitting process (shared/routing/runs-here.ts) writes no outbox row: when its process
// dies mid-run, what the insert committed (the invocation running, attempt 1 recorded before the call)
// must be enough for the executions recovery sweep to send its job and a worker to finish it. The runner
// here never runs, as if the process were gone. Own database with the sweep on: it reads every open
// invocation, and other files' have their jobs under other prefixes.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let buyer: TestAgent;
let seller: TestSeller;
let service: TestService;
let revive!: () => void;
const dead = new Promise<void>((resolve) => {
  revive = resolve;
});

beforeAll(async () => {
  ownDb = await useOwnDatabase("runs_here_recovery");
  overrideConfig({ executionsRecoveryIntervalMs: 250, executeSyncWaitMs: 200 });
  buyer = await buildAgent();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  service = await startService({ runHere: () => dead });
});

afterAll(async () => {
  revive();
  await service?.stop();
  await seller?.close();
  await ownDb?.drop();
});

async function invocationStatus(id: string): Promise<string> {
  return (await db()("invocations").where({ id }).first()).status;
}

/** A direct invoke whose run dies: 202 after a short wait, its invocation id. */
async function invokeAndDie(safeToRetry: boolean, input: Record<string, unknown>): Promise<string> {
  const listing = await buildListing({ endpointUrl: seller.url, maxLatencyMs: 500, safeToRetry });
  const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input } });
  expect(res.status).toBe(202);
  return res.body.invocation_id;
}

describe("a run here whose process dies mid-run", () => {
  // Both start together: each waits out the sweep's grace before anything is sent.
  const wait = (RECOVERY_GRACE_SECONDS + 10) * 1000;
  let retried: Promise<string>;
  let once: Promise<string>;
  beforeAll(() => {
    retried = invokeAndDie(true, { k: 1 });
    once = invokeAndDie(false, { k: 2 });
  });

  it("leaves no outbox row, and is finished by the queue once the recovery sweep sends its job: attempt 1 waited out, then called again", async () => {
    const id = await retried;
    expect(await db()("job_outbox").where({ job_id: id }).first()).toBeUndefined();
    // Attempt 1 was recorded by the insert, before any call: a worker must not take it as never made.
    expect((await listAttempts(db(), id)).map((a) => a.status)).toEqual(["running"]);
    await waitFor("the queue's run", async () => (await invocationStatus(id)) === "succeeded", wait);
    expect(await getQueue("executions").getJob(id)).toBeDefined();
    const attempts = await listAttempts(db(), id);
    expect(attempts.map((a) => a.status)).toEqual(["abandoned", "succeeded"]);
    expect(seller.calls.filter((c) => c.body.invocation_id === id)).toHaveLength(1);
  }, 30_000);

  it("never calls a listing that is not safe_to_retry: attempt 1 may have reached it", async () => {
    const id = await once;
    await waitFor("the queue's run", async () => (await invocationStatus(id)) === "failed", wait);
    expect((await listAttempts(db(), id)).map((a) => a.status)).toEqual(["abandoned"]);
    expect(seller.calls.filter((c) => c.body.invocation_id === id)).toHaveLength(0);
  }, 30_000);
});
