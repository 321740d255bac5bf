import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { type RunningProcess, startProcess, waitFor } from "../helpers/processes.js";
import { json, startSeller } from "../helpers/seller.js";

// The Procfile's `web` and `executions` processes, run as separate OS processes against this file's
// port and queue prefix. Short BullMQ locks let a killed worker's job be retaken in seconds.
const env = {
  WORKER_LOCK_DURATION_MS: "2000",
  WORKER_STALLED_INTERVAL_MS: "1000",
  EXECUTE_SYNC_WAIT_MS: "3000",
  LOG_LEVEL: "warn",
};

let web: RunningProcess;
const workers: RunningProcess[] = [];

function startWorker(): RunningProcess {
  const worker = startProcess("dist/workers/main.js", ["executions"], env);
  workers.push(worker);
  return worker;
}

async function healthy(): Promise<boolean> {
  const res = await api("GET", "/api/health");
  return res.status === 200;
}

beforeAll(async () => {
  web = startProcess("dist/api/main.js", [], env);
  startWorker();
  await waitFor("web and executions to be healthy", healthy).catch((error) => {
    throw new Error(`${error}\n--- web output ---\n${web.output()}`);
  });
});

afterAll(async () => {
  for (const p of [web, ...workers]) p?.child.kill("SIGKILL");
  await getQueue("executions")
    .obliterate({ force: true })
    .catch(() => {});
  await closeDb();
});

describe("web and executions as separate processes", () => {
  it("runs quickstart → execute echo → status → receipt", async () => {
    const registered = await api("POST", "/api/quickstart", { body: { name: "e2e agent", intent: "buyer" } });
    expect(registered.status).toBe(201);
    const key = registered.body.api_key;

    const executed = await api("POST", "/api/execute", {
      key,
      body: { task: "echo", input: { message: "across processes" } },
    });
    expect(executed.status).toBe(200);
    expect(executed.body.output.echo).toEqual({ message: "across processes" });

    const status = await api("GET", `/api/execute/status/${executed.body.invocation_id}`, { key });
    expect(status.body).toMatchObject({ status: "succeeded", receipt_id: executed.body.receipt_id });
    const receipt = await api("GET", `/api/commerce/receipts/${executed.body.receipt_id}`, { key });
    expect(receipt.status).toBe(200);
    expect(receipt.body.invocation_id).toBe(executed.body.invocation_id);
  });

  it("completes an invocation exactly once when its worker is SIGKILLed mid-call", async () => {
    // The first call hangs (the worker dies holding it); the retry after the restart answers.
    const seller = await startSeller((_call, res, index) => {
      if (index > 0) json(res, 200, { success: true, output: { served_by_call: index } });
    });
    try {
      // A short max_latency_ms keeps the dead call's attempt deadline (timeout + margin) a few seconds away.
      const listing = await buildListing({ endpointUrl: seller.url, safeToRetry: true, maxLatencyMs: 2000 });
      const buyer = await buildAgent();
      const submitted = api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: { n: 1 } },
      });
      await waitFor("the provider to receive the first call", async () => seller.calls.length === 1);

      const doomed = workers.at(-1)!;
      doomed.child.kill("SIGKILL");
      expect(await doomed.exited).toBe("SIGKILL");
      startWorker();

      // Whether the API's bounded wait outlasts the recovery (200) or not (202), the outcome must match.
      const accepted = await submitted;
      expect([200, 202]).toContain(accepted.status);
      const invocationId = accepted.body.invocation_id;
      const done = await waitFor("the invocation to finish", async () => {
        const res = await api("GET", `/api/execute/status/${invocationId}`, { key: buyer.apiKey });
        return ["succeeded", "failed"].includes(res.body.status) && res.body;
      });

      expect(done.status).toBe("succeeded");
      expect(done.output).toEqual({ served_by_call: 1 });
      expect(done.attempts.map((a: { status: string }) => a.status)).toEqual(["abandoned", "succeeded"]);
      expect(seller.calls).toHaveLength(2);
      expect(seller.calls.map((c) => c.headers["idempotency-key"])).toEqual([invocationId, invocationId]);
      const receipts = await db()("receipts").where({ invocation_id: invocationId }).count({ n: "*" });
      expect(Number(receipts[0]!.n)).toBe(1);
      // Give any duplicate delivery time to show itself before concluding "exactly once".
      await new Promise((r) => setTimeout(r, 2500));
      const again = await db()("receipts").where({ invocation_id: invocationId }).count({ n: "*" });
      expect(Number(again[0]!.n)).toBe(1);
      expect(seller.calls).toHaveLength(2);
    } finally {
      await seller.close();
    }
  });

  it("drains and exits 0 on SIGTERM", async () => {
    const worker = workers.at(-1)!;
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
    web.child.kill("SIGTERM");
    expect(await web.exited).toBe(0);
    expect(getConfig().port).toBeGreaterThan(0);
  });
});
