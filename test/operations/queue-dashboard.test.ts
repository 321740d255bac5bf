import { randomUUID } from "node:crypto";
import { UnrecoverableError, Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { QUEUE_NAMES } from "../../shared/queue-names.js";
import { enqueue, getQueue } from "../../shared/queues.js";
import { createRedis } from "../../shared/redis.js";
import { startService, type TestService } from "../helpers/service.js";

// The queue dashboard (docs/operations.md "Queue dashboard"): bull-board at /admin/queues for the
// operator only, read-only unless ADMIN_QUEUE_RETRIES=true, and then retries only.

const ADMIN_KEY = "admin-key-for-the-queue-dashboard-test-0123456789";
let service: TestService;

beforeAll(async () => {
  overrideConfig({ adminApiKey: ADMIN_KEY });
  service = await startService({ worker: false });
});
afterAll(async () => {
  await getQueue("monitoring-runs")
    .obliterate({ force: true })
    .catch(() => {});
  await service.stop();
});

const bearer = { authorization: `Bearer ${ADMIN_KEY}` };
const get = (path: string, headers: Record<string, string> = {}) =>
  fetch(`${service.baseUrl}/admin/queues${path}`, { headers, redirect: "manual" });
const put = (path: string, headers: Record<string, string> = bearer) =>
  fetch(`${service.baseUrl}/admin/queues${path}`, { method: "PUT", headers, redirect: "manual" });

/** A job of monitoring-runs that failed for good. */
async function failedJob(): Promise<string> {
  const id = randomUUID();
  await enqueue("monitoring-runs", id, { subscription_id: id });
  const worker = new Worker(
    "monitoring-runs",
    async () => {
      throw new UnrecoverableError("fails on purpose");
    },
    { connection: createRedis("worker"), prefix: getConfig().queuePrefix },
  );
  try {
    await expect
      .poll(async () => (await getQueue("monitoring-runs").getJob(id))?.failedReason)
      .toBe("fails on purpose");
  } finally {
    await worker.close();
  }
  return id;
}

describe("/admin/queues", () => {
  it("is for the operator only: a browser without a session goes to sign in, an API client gets 401", async () => {
    const browser = await get("", { accept: "text/html" });
    expect(browser.status).toBe(302);
    expect(browser.headers.get("location")).toBe("/admin");
    const client = await get("/api/queues", { accept: "application/json" });
    expect(client.status).toBe(401);
    expect(((await client.json()) as { error: { code: string } }).error.code).toBe("UNAUTHORIZED");
    expect((await get("/api/queues", { authorization: "Bearer wrong" })).status).toBe(401);
  });

  it("shows every queue of the registry, read-only, with the admin key", async () => {
    const ui = await get("", bearer);
    expect(ui.status).toBe(200);
    expect(ui.headers.get("content-type")).toMatch(/^text\/html/);
    const res = await get("/api/queues", bearer);
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      queues: { name: string; readOnlyMode: boolean; allowRetries: boolean }[];
    };
    expect(body.queues.map((q) => q.name).sort()).toEqual([...QUEUE_NAMES].sort());
    for (const q of body.queues) expect(q).toMatchObject({ readOnlyMode: true, allowRetries: false });
  });

  it("refuses every write while read-only, and allows only retries of failed jobs with ADMIN_QUEUE_RETRIES", async () => {
    const id = await failedJob();
    const refused = await put(`/api/queues/monitoring-runs/${id}/retry`);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("POLICY_BLOCKED");
    expect(await (await getQueue("monitoring-runs").getJob(id))!.isFailed()).toBe(true);

    overrideConfig({ adminQueueRetries: true });
    try {
      expect((await put("/api/queues/monitoring-runs/clean/failed")).status).toBe(403);
      expect((await put("/api/queues/monitoring-runs/obliterate")).status).toBe(403);
      expect((await put("/api/queues/monitoring-runs/pause")).status).toBe(403);
      const retried = await put(`/api/queues/monitoring-runs/${id}/retry`);
      expect(retried.status).toBe(204);
      expect(await getQueue("monitoring-runs").getJobState(id)).toBe("waiting");
    } finally {
      overrideConfig({ adminQueueRetries: false });
    }
  });
});
