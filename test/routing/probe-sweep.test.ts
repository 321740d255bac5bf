import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { listProbes } from "../../shared/catalog/store/health-probes.js";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { type Config, getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { enqueue, getQueue } from "../../shared/queues.js";
import { closeCommandRedis, commandRedis } from "../../shared/redis.js";
import { circuitState } from "../../shared/routing/circuit-breaker.js";
import {
  PROBE_SWEEP_SCHEDULER_ID,
  processHealthProbe,
  processProbeSweep,
  scheduleProbeSweep,
} from "../../shared/routing/probe-sweep.js";
import { startHealthProbesWorker } from "../../workers/health-probes.js";
import { buildListing, type ListingOverrides } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { waitFor } from "../helpers/processes.js";
import { json, type SellerHandler, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
const original: Config = getConfig();

beforeAll(async () => {
  service = await startService();
});
afterEach(() => {
  overrideConfig(original);
});
afterAll(async () => {
  const circuits = await commandRedis().keys(`${original.queuePrefix}:circuit:*`);
  if (circuits.length > 0) await commandRedis().del(...circuits);
  await closeCommandRedis();
  await getQueue("health-probes")
    .obliterate({ force: true })
    .catch(() => {});
  await service.stop();
});

/** Runs body with a loopback seller and a listing pointing at it. */
async function withSeller(
  handler: SellerHandler,
  body: (ctx: { seller: TestSeller; listing: ListingRow }) => Promise<void>,
  listing: Partial<ListingOverrides> = {},
): Promise<void> {
  const seller = await startSeller(handler);
  try {
    await body({ seller, listing: await buildListing({ endpointUrl: seller.url, ...listing }) });
  } finally {
    await seller.close();
  }
}

async function verdict(listingId: string) {
  return (await db()("listings").where({ id: listingId }).first()).verification_status;
}

/** A seller whose answer is whatever `status.code` says at the time of the call. */
function switchable(status: { code: number }): SellerHandler {
  return (_call, res) => json(res, status.code, { probe: "seen" });
}

describe("processHealthProbe", () => {
  it("records an ok probe of a healthy seller and makes the listing reachable; the probe is no invocation", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { ok: true }),
      async ({ seller, listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({
          status: "probed",
          ok: true,
          verification_status: "reachable",
          circuit: "closed",
        });
        const [probe] = await listProbes(db(), listing.id);
        expect(probe).toMatchObject({ ok: true, http_status: 200, error: null });
        expect(probe!.latency_ms).toBeGreaterThanOrEqual(0);
        expect(await verdict(listing.id)).toBe("reachable");
        expect(seller.calls).toHaveLength(1);
        const call = seller.calls[0]!;
        expect(call.body).toEqual({ probe: true });
        expect(call.headers["x-agentmarket-probe"]).toBe("1");
        expect(call.headers["content-type"]).toBe("application/json");
        expect(call.headers["idempotency-key"]).toBeUndefined();
        expect(call.headers["x-invocation-id"]).toBeUndefined();
      },
    );
  });

  it("counts an endpoint that rejects the probe (405) as reachable: it answered", async () => {
    await withSeller(
      (_call, res) => json(res, 405, { error: "method not allowed" }),
      async ({ listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({ ok: true });
        expect((await listProbes(db(), listing.id))[0]).toMatchObject({ ok: true, http_status: 405 });
        expect(await verdict(listing.id)).toBe("reachable");
      },
    );
  });

  it("fails the probe of a seller answering 500, without marking the listing failed after one", async () => {
    await withSeller(
      (_call, res) => json(res, 500, { error: "boom" }),
      async ({ listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({
          ok: false,
          verification_status: null,
        });
        const [probe] = await listProbes(db(), listing.id);
        expect(probe).toMatchObject({ ok: false, http_status: 500 });
        expect(probe!.error).toContain("HTTP 500");
        expect(await verdict(listing.id)).toBeNull();
      },
    );
  });

  it("marks the listing failed after three consecutive failures and reachable on the next success", async () => {
    const status = { code: 200 };
    await withSeller(switchable(status), async ({ listing }) => {
      const probe = () => processHealthProbe({ listing_id: listing.id });
      await probe();
      expect(await verdict(listing.id)).toBe("reachable");
      status.code = 503;
      await probe();
      await probe();
      expect(await verdict(listing.id)).toBe("reachable");
      expect(await probe()).toMatchObject({ ok: false, verification_status: "failed" });
      expect(await verdict(listing.id)).toBe("failed");
      status.code = 200;
      expect(await probe()).toMatchObject({ ok: true, verification_status: "reachable" });
      expect(await verdict(listing.id)).toBe("reachable");
    });
  });

  it("needs the failures to be consecutive: a success in between starts the count again", async () => {
    const status = { code: 500 };
    await withSeller(switchable(status), async ({ listing }) => {
      const probe = () => processHealthProbe({ listing_id: listing.id });
      await probe();
      await probe();
      status.code = 200;
      await probe();
      status.code = 500;
      await probe();
      await probe();
      expect(await verdict(listing.id)).toBe("reachable");
      await probe();
      expect(await verdict(listing.id)).toBe("failed");
    });
  });

  it("follows HEALTH_PROBE_FAILURES_TO_FAIL", async () => {
    overrideConfig({ healthProbeFailuresToFail: 1 });
    await withSeller(
      (_call, res) => json(res, 502, {}),
      async ({ listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({
          verification_status: "failed",
        });
      },
    );
  });

  it("never overwrites verified, on failures or on success", async () => {
    const status = { code: 500 };
    await withSeller(
      switchable(status),
      async ({ listing }) => {
        for (let i = 0; i < 3; i++) await processHealthProbe({ listing_id: listing.id });
        expect(await verdict(listing.id)).toBe("verified");
        status.code = 200;
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({
          ok: true,
          verification_status: "verified",
        });
        expect(await listProbes(db(), listing.id)).toHaveLength(4);
      },
      { verificationStatus: "verified" },
    );
  });

  it("counts a refused connection as a failure", async () => {
    const seller = await startSeller((_call, res) => json(res, 200, {}));
    await seller.close();
    const listing = await buildListing({ endpointUrl: seller.url });
    expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({ ok: false });
    const [probe] = await listProbes(db(), listing.id);
    expect(probe).toMatchObject({ ok: false, http_status: null, latency_ms: null });
    expect(probe!.error).toMatch(/^connect: /);
  });

  it("fails a probe not answered within HEALTH_PROBE_TIMEOUT_MS", async () => {
    overrideConfig({ healthProbeTimeoutMs: 200 });
    await withSeller(
      async (_call, res) => {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        json(res, 200, {});
      },
      async ({ listing }) => {
        const started = Date.now();
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({ ok: false });
        expect(Date.now() - started).toBeLessThan(900);
        expect((await listProbes(db(), listing.id))[0]!.error).toMatch(/^timeout: /);
      },
    );
  });

  it("fails on a redirect and does not follow it", async () => {
    await withSeller(
      (_call, res) => {
        res.writeHead(302, { location: "/elsewhere" });
        res.end();
      },
      async ({ seller, listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({ ok: false });
        expect((await listProbes(db(), listing.id))[0]!.error).toMatch(/^redirect: /);
        expect(seller.calls).toHaveLength(1);
      },
    );
  });

  it("skips retired and unknown listings without calling them", async () => {
    await withSeller(
      (_call, res) => json(res, 200, {}),
      async ({ seller, listing }) => {
        expect(await processHealthProbe({ listing_id: listing.id })).toEqual({
          status: "skipped",
          reason: "listing_retired",
        });
        expect(await processHealthProbe({ listing_id: randomUUID() })).toEqual({
          status: "skipped",
          reason: "listing_not_found",
        });
        expect(seller.calls).toHaveLength(0);
        expect(await listProbes(db(), listing.id)).toHaveLength(0);
      },
      { status: "retired" },
    );
  });

  it("feeds the circuit breaker: CIRCUIT_FAILURE_THRESHOLD failed probes open the circuit", async () => {
    overrideConfig({ circuitFailureThreshold: 3 });
    await withSeller(
      (_call, res) => json(res, 500, {}),
      async ({ listing }) => {
        await processHealthProbe({ listing_id: listing.id });
        await processHealthProbe({ listing_id: listing.id });
        expect((await circuitState([listing.id])).get(listing.id)).toBe("closed");
        expect(await processHealthProbe({ listing_id: listing.id })).toMatchObject({ circuit: "open" });
        expect((await circuitState([listing.id])).get(listing.id)).toBe("open");
      },
    );
  });
});

describe("listing record telemetry from real probes", () => {
  it("shows uptime, probe counts, endpoint_health and latest_health_status in GET /api/capabilities/{id}", async () => {
    const status = { code: 200 };
    await withSeller(switchable(status), async ({ listing }) => {
      const read = async () => {
        const res = await api("GET", `/api/capabilities/${listing.id}`);
        expect(res.status).toBe(200);
        return res.body;
      };
      const before = await read();
      expect(before.telemetry).toMatchObject({
        uptime_30d_pct: null,
        uptime_30d_pct_null_reason: "no_health_probes_recorded",
        health_probe_count_30d: 0,
      });
      expect(before.endpoint_health).toBeNull();

      await processHealthProbe({ listing_id: listing.id });
      await processHealthProbe({ listing_id: listing.id });
      status.code = 500;
      await processHealthProbe({ listing_id: listing.id });
      const after = await read();
      expect(after.telemetry).toMatchObject({ uptime_30d_pct: 66.7, health_probe_count_30d: 3 });
      expect(after.telemetry.uptime_30d_pct_null_reason).toBeUndefined();
      expect(after).toMatchObject({
        endpoint_health: "unhealthy",
        endpoint_health_rate: 0.6667,
        verification_status: "reachable",
      });
      expect(after.buyer_evidence).toMatchObject({
        uptime_7d_pct: 66.7,
        uptime_30d_pct: 66.7,
        health_probe_count_7d: 3,
        health_probe_count_30d: 3,
        latest_health_status: "unhealthy",
      });
      const latest = (await listProbes(db(), listing.id))[0]!;
      expect(after.buyer_evidence.latest_health_probe_at).toBe(latest.probed_at.toISOString());

      status.code = 200;
      await processHealthProbe({ listing_id: listing.id });
      const recovered = await read();
      expect(recovered.endpoint_health).toBe("healthy");
      expect(recovered.buyer_evidence.latest_health_status).toBe("healthy");
      expect(recovered.telemetry.uptime_30d_pct).toBe(75);
    });
  });
});

describe("the health-probes worker", () => {
  it("runs probe jobs from the queue and fails a malformed payload without retries", async () => {
    const worker = startHealthProbesWorker();
    try {
      await worker.waitUntilReady();
      await withSeller(
        (_call, res) => json(res, 200, {}),
        async ({ listing }) => {
          await enqueue("health-probes", `probe-${listing.id}-1`, { listing_id: listing.id });
          await waitFor("the probe row", async () => (await listProbes(db(), listing.id)).length === 1);
          const bad = await enqueue("health-probes", `probe-${listing.id}-2`, {
            listing_id: listing.id,
            sweep: true,
          });
          await waitFor("the bad job to fail", async () => (await bad.getState()) === "failed");
          const failed = await getQueue("health-probes").getJob(bad.id!);
          expect(failed!.failedReason).toContain("invalid job payload");
          expect(failed!.attemptsMade).toBe(1);
        },
      );
    } finally {
      await worker.close();
    }
  });
});

describe("the probe-sweep scheduler", () => {
  it("is upserted idempotently every HEALTH_PROBE_INTERVAL_MS and removed when it is 0", async () => {
    const queue = getQueue("health-probes");
    try {
      overrideConfig({ healthProbeIntervalMs: 60_000 });
      expect(await scheduleProbeSweep()).toBe("scheduled");
      expect(await scheduleProbeSweep()).toBe("scheduled");
      expect(await queue.getJobSchedulersCount()).toBe(1);
      const scheduler = await queue.getJobScheduler(PROBE_SWEEP_SCHEDULER_ID);
      expect(scheduler).toMatchObject({ every: 60_000, template: { data: { sweep: true } } });
      overrideConfig({ healthProbeIntervalMs: 0 });
      expect(await scheduleProbeSweep()).toBe("disabled");
      expect(await queue.getJobScheduler(PROBE_SWEEP_SCHEDULER_ID)).toBeUndefined();
    } finally {
      // No worker runs here, so the sweep job the scheduler added is only removed, never run.
      await queue.obliterate({ force: true });
    }
  });

  it("the sweep enqueues one jittered probe job per active listing and none for retired ones", async () => {
    const queue = getQueue("health-probes");
    try {
      const active = [await buildListing({ endpointUrl: "http://127.0.0.1:9/a" })];
      active.push(await buildListing({ endpointUrl: "http://127.0.0.1:9/b" }));
      const retired = await buildListing({ endpointUrl: "http://127.0.0.1:9/c", status: "retired" });
      const activeCount = async () =>
        Number((await db()("listings").where({ status: "active" }).count({ n: "*" }))[0]!.n);
      const sweptAt = Date.now();
      const slot = Math.floor(sweptAt / 1000); // HEALTH_PROBE_INTERVAL_MS is 0 here: one slot per second
      const { rows: clock } = await db().raw("select now() as now");
      const before = await activeCount();
      const enqueued = await processProbeSweep(sweptAt);
      // Other test files add listings meanwhile: the sweep saw every listing active before it started.
      expect(enqueued).toBeGreaterThanOrEqual(before);
      expect(enqueued).toBeLessThanOrEqual(await activeCount());
      for (const listing of active) {
        const job = await queue.getJob(`probe-${listing.id}-${slot}`);
        expect(job?.data).toEqual({ listing_id: listing.id });
        expect(job!.opts.delay).toBeGreaterThanOrEqual(0);
        expect(job!.opts.delay).toBeLessThan(getConfig().healthProbeJitterMs);
        expect(job!.opts.attempts).toBe(1);
        expect(job!.id).not.toContain(":");
      }
      expect(await queue.getJob(`probe-${retired.id}-${slot}`)).toBeUndefined();

      const jobsBefore = await queue.getDelayedCount();
      const again = await processProbeSweep(sweptAt);
      // The same slot again adds nothing new, save listings other files created in between (counted by
      // creation: other files also retire and delete listings, so the active count can stand still).
      const createdSince = Number(
        (await db()("listings").where("created_at", ">=", clock[0].now).count({ n: "*" }))[0]!.n,
      );
      expect(again).toBeGreaterThan(0);
      expect((await queue.getDelayedCount()) - jobsBefore).toBeLessThanOrEqual(createdSince);
    } finally {
      await queue.obliterate({ force: true });
    }
  });
});
