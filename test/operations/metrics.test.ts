import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { creditDeposit } from "../../shared/money/ledger/flows.js";
import { observeJobs } from "../../shared/observability/metrics.js";
import { startMetricsServer } from "../../shared/observability/metrics-server.js";
import { QUEUE_NAMES } from "../../shared/queue-names.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { type Exposition, parseExposition } from "../helpers/prometheus.js";
import { json, startSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// /metrics (docs/operations.md "Metrics"): scraped and parsed strictly; the series operators scale
// pools by are there; no label value is an id.

let service: TestService;

beforeAll(async () => {
  // Through the queue: its job series are among those under test.
  service = await startService({ runHere: false });
  // workers/start.ts does this for every worker of a process; the test service starts its own.
  observeJobs(service.worker as never);
});
afterAll(async () => service.stop());

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

async function scrape(headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(`${service.baseUrl}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

const series = (e: Exposition, name: string) => e.samples.filter((s) => s.name === name);

describe("GET /metrics", () => {
  it("exposes HTTP, queue, provider, money and breaker series with bounded labels", async () => {
    const buyer = await buildAgent();
    const depositId = randomUUID();
    await creditDeposit({
      agentId: buyer.agentId,
      currency: "USDC",
      amountMicros: 2_500_000n,
      reference: { type: "test", id: depositId },
      idempotencyKey: `test:deposit:${depositId}`,
    });
    const seller = await startSeller((_call, res) => json(res, 200, { ok: true }));
    try {
      const listing = await buildListing({ endpointUrl: seller.url });
      // Three reads of different listings share one route template; an unknown path is `unmatched`.
      await api("GET", `/api/capabilities/${listing.id}`);
      await api("GET", "/api/capabilities/00000000-0000-4000-8000-000000000000");
      await fetch(`${service.baseUrl}/no/such/${listing.id}`);
      const run = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {} },
      });
      expect(run.status).toBe(200);
    } finally {
      await seller.close();
    }

    const e = await scrape();
    for (const name of [
      "agentmarket_http_requests_total",
      "agentmarket_http_request_duration_seconds",
      "agentmarket_queue_jobs",
      "agentmarket_job_duration_seconds",
      "agentmarket_provider_attempts_total",
      "agentmarket_payouts",
      "agentmarket_payouts_amount_usdc",
      "agentmarket_x402_settlements",
      "agentmarket_settlement_lag_seconds",
      "agentmarket_ledger_balance",
      "agentmarket_circuit_breakers",
    ]) {
      expect(e.types.has(name), name).toBe(true);
    }

    const reads = series(e, "agentmarket_http_requests_total").filter(
      (s) => s.labels.route === "/api/capabilities/:id",
    );
    expect(reads.find((s) => s.labels.status === "200")?.value).toBeGreaterThanOrEqual(1);
    expect(reads.find((s) => s.labels.status === "404")?.value).toBeGreaterThanOrEqual(1);
    expect(
      series(e, "agentmarket_http_requests_total").some(
        (s) => s.labels.route === "unmatched" && s.labels.status === "404",
      ),
    ).toBe(true);

    for (const queue of QUEUE_NAMES) {
      for (const state of ["waiting", "active", "delayed", "failed"]) {
        expect(
          series(e, "agentmarket_queue_jobs").some(
            (s) => s.labels.queue === queue && s.labels.state === state,
          ),
          `${queue} ${state}`,
        ).toBe(true);
      }
    }
    expect(
      series(e, "agentmarket_job_duration_seconds_count").find(
        (s) => s.labels.queue === "executions" && s.labels.outcome === "completed",
      )?.value,
    ).toBeGreaterThanOrEqual(1);
    expect(
      series(e, "agentmarket_provider_attempts_total").find((s) => s.labels.outcome === "succeeded")?.value,
    ).toBeGreaterThanOrEqual(1);
    expect(
      series(e, "agentmarket_payouts")
        .map((s) => s.labels.status)
        .sort(),
    ).toEqual(["confirmed", "failed", "pending", "submitted"]);
    expect(series(e, "agentmarket_settlement_lag_seconds")[0]!.value).toBeGreaterThanOrEqual(0);
    const usdc = series(e, "agentmarket_ledger_balance").filter((s) => s.labels.currency === "USDC");
    expect(usdc.reduce((sum, s) => sum + s.value, 0)).toBeCloseTo(0, 6); // double entry: Σ = 0
    expect(usdc.some((s) => s.value >= 2.5)).toBe(true);
    expect(
      series(e, "agentmarket_circuit_breakers")
        .map((s) => s.labels.state)
        .sort(),
    ).toEqual(["closed", "half_open", "open"]);

    // Bounded cardinality: no label value anywhere is an id.
    for (const s of e.samples) {
      for (const [label, value] of Object.entries(s.labels)) {
        expect(UUID.test(value), `${s.name}{${label}="${value}"}`).toBe(false);
      }
    }
  });

  it("requires METRICS_TOKEN as a bearer token when one is set", async () => {
    const token = "metrics-token-for-the-test-0123";
    overrideConfig({ metricsToken: token });
    try {
      expect((await fetch(`${service.baseUrl}/metrics`)).status).toBe(401);
      const wrong = await fetch(`${service.baseUrl}/metrics`, { headers: { authorization: "Bearer nope" } });
      expect(wrong.status).toBe(401);
      const e = await scrape({ authorization: `Bearer ${token}` });
      expect(e.types.get("agentmarket_http_requests_total")).toBe("counter");
    } finally {
      overrideConfig({ metricsToken: undefined });
    }
  });
});

describe("a worker process's metrics port", () => {
  it("serves its own registry at /metrics and nothing else", async () => {
    const server = await startMetricsServer(0, "127.0.0.1");
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      const e = parseExposition(await res.text());
      expect(e.types.get("agentmarket_job_duration_seconds")).toBe("histogram");
      expect(e.types.get("agentmarket_process_cpu_seconds_total")).toBe("counter");
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
