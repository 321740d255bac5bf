import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { freePort } from "../../shared/infra/free-port.js";
import { getQueue } from "../../shared/queues.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startProcess, waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let buyer: TestAgent;
const sellers: TestSeller[] = [];

beforeAll(async () => {
  service = await startService();
  buyer = await buildAgent();
});
afterAll(async () => {
  for (const s of sellers) await s.close();
  await service.stop();
});

async function seller(answer: (index: number) => [number, unknown]): Promise<TestSeller> {
  const s = await startSeller((_call, res, index) => {
    const [status, body] = answer(index);
    json(res, status, body);
  });
  sellers.push(s);
  return s;
}

const ok = (output: unknown) => (): [number, unknown] => [200, { success: true, output }];
const broken = (): [number, unknown] => [500, { error: "boom" }];
const taskName = () => `task-${randomBytes(4).toString("hex")}`;

describe("GET /api/execute/match", () => {
  it("ranks eligible providers with the score components, and names what was excluded and why", async () => {
    const task = taskName();
    const a = await seller(ok({}));
    const verified = await buildListing({ endpointUrl: a.url, tags: [task], verificationStatus: "verified" });
    const plain = await buildListing({ endpointUrl: a.url, tags: [task] });
    const failed = await buildListing({ endpointUrl: a.url, tags: [task], verificationStatus: "failed" });
    const paid = await buildListing({ endpointUrl: a.url, tags: [task], price: 0.05 });
    const res = await api("GET", `/api/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([
      verified.id,
      plain.id,
    ]);
    const [top] = res.body.candidates;
    expect(top).toMatchObject({
      rank: 1,
      price_usdc: "0.000000",
      safe_to_retry: true,
      verification_status: "verified",
    });
    expect(Object.keys(top.score_components).sort()).toEqual([
      "latency",
      "price",
      "reliability",
      "verification",
    ]);
    expect(top.score).toBeGreaterThan(res.body.candidates[1].score);
    expect(res.body.excluded).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ listing_id: failed.id, reason: "verification_failed" }),
        expect.objectContaining({ listing_id: paid.id, reason: "paid_execution_unavailable" }),
      ]),
    );
    expect(res.body.ranking.formula).toContain("0.40");
  });

  it("max_cost leaves out listings priced above it; an unknown task has no candidates", async () => {
    const task = taskName();
    const a = await seller(ok({}));
    const pricey = await buildListing({ endpointUrl: a.url, tags: [task], price: 0.5 });
    const res = await api("GET", `/api/execute/match?task=${task}&max_cost=0.1`, { key: buyer.apiKey });
    expect(res.body.excluded).toEqual([
      expect.objectContaining({ listing_id: pricey.id, reason: "over_max_cost" }),
    ]);
    const none = await api("GET", `/api/execute/match?task=${taskName()}`, { key: buyer.apiKey });
    expect(none.body).toMatchObject({ candidates: [], excluded: [] });
    expect((await api("GET", "/api/execute/match", { key: buyer.apiKey })).status).toBe(400);
    expect((await api("GET", `/api/execute/match?task=${task}`)).status).toBe(401);
  });
});

describe("POST /api/execute fallback", () => {
  it("falls back to the next candidate when the first fails, and says who served and why", async () => {
    const task = taskName();
    const first = await seller(broken);
    const second = await seller(ok({ from: "second" }));
    const a = await buildListing({ endpointUrl: first.url, tags: [task], verificationStatus: "verified" });
    const b = await buildListing({ endpointUrl: second.url, tags: [task] });
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(res.status).toBe(200);
    expect(res.body.output).toEqual({ from: "second" });
    expect(res.body.provider).toMatchObject({
      listing_id: b.id,
      selection_reason: "fallback_after_higher_ranked_candidate_failed",
    });
    expect(res.body.selection.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([
      a.id,
      b.id,
    ]);
    const servedBy = {
      served_listing_id: b.id,
      served_listing_id_null_reason: null,
      selection_reason: "fallback_after_higher_ranked_candidate_failed",
      selection_basis: {
        rank: 2,
        score: res.body.selection.candidates[1].score,
        score_components: res.body.selection.candidates[1].score_components,
        passed_over: [a.id],
      },
      selection_basis_null_reason: null,
    };
    expect(res.body).toMatchObject(servedBy);
    const attempts = [
      { listing_id: a.id, status: "failed", error_code: "PROVIDER_FAILED", http_status: 500 },
      { listing_id: b.id, status: "succeeded", error_code: null, http_status: 200 },
    ];
    const status = await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key: buyer.apiKey });
    expect(status.body).toMatchObject({
      listing_id: b.id,
      first_choice_listing_id: a.id,
      ...servedBy,
      attempts,
    });
    for (const attempt of status.body.attempts) expect(attempt.latency_ms).toBeGreaterThanOrEqual(0);
    const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, { key: buyer.apiKey });
    expect(receipt.body).toMatchObject({ listing_id: b.id, ...servedBy, attempts });
    expect(first.calls).toHaveLength(1);
  });

  it("never calls a provider that is not safe_to_retry twice; retries one that is", async () => {
    const task = taskName();
    const unsafe = await seller(broken);
    await buildListing({ endpointUrl: unsafe.url, tags: [task], safeToRetry: false });
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(res.status).toBe(502);
    expect(errorCode(res)).toBe("PROVIDER_FAILED");
    expect(unsafe.calls).toHaveLength(1);
    const failed = await api("GET", `/api/execute/status/${res.body.error.details.invocation_id}`, {
      key: buyer.apiKey,
    });
    expect(failed.body).toMatchObject({
      served_listing_id: null,
      served_listing_id_null_reason: "no_candidate_succeeded",
      selection_reason: null,
      selection_basis: null,
      selection_basis_null_reason: "no_listing_served",
    });

    const retryTask = taskName();
    const flaky = await seller((i) => (i < 2 ? broken() : [200, { success: true, output: { third: true } }]));
    await buildListing({ endpointUrl: flaky.url, tags: [retryTask], safeToRetry: true });
    const retried = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: retryTask, input: {} },
    });
    expect(retried.status).toBe(200);
    expect(flaky.calls).toHaveLength(3);
  });

  it("validates input against the chosen listing's schema, and skips fallbacks whose schema rejects it", async () => {
    const task = taskName();
    const first = await seller(broken);
    const strict = await seller(ok({ strict: true }));
    await buildListing({ endpointUrl: first.url, tags: [task], verificationStatus: "verified" });
    await buildListing({
      endpointUrl: strict.url,
      tags: [task],
      inputSchema: { type: "object", required: ["other"] },
    });
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: { n: 1 } } });
    expect(res.status).toBe(502);
    expect(strict.calls).toHaveLength(0);
    const bad = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task, input: "nope" as unknown as Record<string, unknown> },
    });
    expect(bad.status).toBe(400);
  });
});

describe("POST /api/invoke/{listing_id}", () => {
  it("calls exactly that listing, without fallback", async () => {
    const task = taskName();
    const failing = await seller(broken);
    const healthy = await seller(ok({}));
    const target = await buildListing({ endpointUrl: failing.url, tags: [task], safeToRetry: false });
    await buildListing({ endpointUrl: healthy.url, tags: [task] });
    const res = await api("POST", `/api/invoke/${target.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(res.status).toBe(502);
    expect(errorCode(res)).toBe("PROVIDER_FAILED");
    expect(healthy.calls).toHaveLength(0);
    expect(failing.calls).toHaveLength(1);
  });

  it("answers with status, output and cost", async () => {
    const s = await seller(ok({ direct: true }));
    const listing = await buildListing({ endpointUrl: s.url });
    const res = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: { a: 1 } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: "succeeded",
      output: { direct: true },
      cost: { amount_usdc: "0.000000" },
    });
    expect(res.body.provider.selection_reason).toBe("direct_invoke_locked_to_listing");
    expect(s.calls[0]!.body.input).toEqual({ a: 1 });
  });

  it("unknown → 404 LISTING_NOT_FOUND; retired or failed → 422 LISTING_NOT_INVOCABLE; paid → 503; bad input → 400", async () => {
    const s = await seller(ok({}));
    for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      const res = await api("POST", `/api/invoke/${id}`, { key: buyer.apiKey, body: { input: {} } });
      expect([res.status, errorCode(res)]).toEqual([404, "LISTING_NOT_FOUND"]);
    }
    for (const overrides of [{ status: "retired" as const }, { verificationStatus: "failed" as const }]) {
      const listing = await buildListing({ endpointUrl: s.url, ...overrides });
      const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
      expect([res.status, errorCode(res)]).toEqual([422, "LISTING_NOT_INVOCABLE"]);
    }
    const paid = await buildListing({ endpointUrl: s.url, price: 0.02 });
    const res = await api("POST", `/api/invoke/${paid.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect([res.status, errorCode(res)]).toEqual([503, "TEMPORARILY_UNAVAILABLE"]);
    const strict = await buildListing({
      endpointUrl: s.url,
      inputSchema: { type: "object", required: ["url"] },
    });
    const bad = await api("POST", `/api/invoke/${strict.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.violations[0].path).toBe("/input/url");
    expect(s.calls).toHaveLength(0);
  });
});

/** Rate windows are wall-clock minutes: start a rate test early enough in one. */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 200));
}

describe("per-listing limits", () => {
  it("direct invoke over rate_limit → 429 RATE_LIMITED with Retry-After; the provider is not called", async () => {
    await awayFromMinuteEdge();
    const s = await seller(ok({}));
    const listing = await buildListing({ endpointUrl: s.url, rateLimit: 2 });
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof api>> | undefined;
    for (let i = 0; i < 3; i++) {
      const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(errorCode(limited!)).toBe("RATE_LIMITED");
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(limited!.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    expect(s.calls).toHaveLength(2);
  });

  it("execute falls back when the top candidate is over its rate limit", async () => {
    await awayFromMinuteEdge();
    const task = taskName();
    const limitedSeller = await seller(ok({ from: "limited" }));
    const other = await seller(ok({ from: "other" }));
    const top = await buildListing({
      endpointUrl: limitedSeller.url,
      tags: [task],
      verificationStatus: "verified",
      rateLimit: 1,
    });
    await buildListing({ endpointUrl: other.url, tags: [task] });
    const first = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(first.body.output).toEqual({ from: "limited" });
    const second = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(second.status).toBe(200);
    expect(second.body.output).toEqual({ from: "other" });
    const status = await api("GET", `/api/execute/status/${second.body.invocation_id}`, {
      key: buyer.apiKey,
    });
    expect(
      status.body.attempts.map((a: { listing_id: string; status: string; error_code: string | null }) => [
        a.listing_id === top.id,
        a.status,
        a.error_code,
      ]),
    ).toEqual([
      [true, "skipped", "RATE_LIMITED"],
      [false, "succeeded", null],
    ]);
  });

  it("concurrency_limit holds under 50 parallel invokes sent to two API processes and run by two workers", async () => {
    // A second web process and a second executions worker, as OS processes on this file's queue prefix.
    const otherPort = await freePort();
    const otherApi = startProcess("dist/api/main.js", [], { LOG_LEVEL: "warn", PORT: String(otherPort) });
    const other = startProcess("dist/workers/main.js", ["executions"], { LOG_LEVEL: "warn" });
    const otherBase = `http://127.0.0.1:${otherPort}`;
    await waitFor(
      "the second API",
      async () => (await api("GET", "/api/stats", { baseUrl: otherBase })).status === 200,
    );
    let inFlight = 0;
    let peak = 0;
    const slow = await startSeller(async (_call, res) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 300));
      inFlight -= 1;
      json(res, 200, { success: true, output: {} });
    });
    sellers.push(slow);
    const listing = await buildListing({ endpointUrl: slow.url, concurrencyLimit: 10, rateLimit: 1000 });
    await waitFor("the second worker", async () => (await getQueue("executions").getWorkersCount()) >= 2);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        api("POST", `/api/invoke/${listing.id}`, {
          key: buyer.apiKey,
          body: { input: {} },
          ...(i % 2 ? { baseUrl: otherBase } : {}),
        }),
      ),
    );
    expect(peak).toBeLessThanOrEqual(10);
    expect(peak).toBeGreaterThan(1);
    const codes = results.map((r) => r.status);
    expect(codes.filter((c) => c === 200).length).toBeGreaterThanOrEqual(10);
    expect(codes.every((c) => c === 200 || c === 429)).toBe(true);
    const rows = await db()("invocation_attempts")
      .where({ listing_id: listing.id, status: "skipped" })
      .count({ n: "*" });
    expect(Number(rows[0]!.n)).toBe(codes.filter((c) => c === 429).length);
    other.child.kill("SIGTERM");
    otherApi.child.kill("SIGTERM");
    expect(await other.exited).toBe(0);
    expect(await otherApi.exited).toBe(0);
  });
});

describe("circuit breaker in routing", () => {
  it("after repeated failures the listing's circuit opens: match excludes it, execute and invoke stop calling it", async () => {
    const task = taskName();
    const failing = await seller(broken);
    const healthy = await seller(ok({ from: "healthy" }));
    const bad = await buildListing({
      endpointUrl: failing.url,
      tags: [task],
      verificationStatus: "verified",
      safeToRetry: false,
    });
    await buildListing({ endpointUrl: healthy.url, tags: [task] });
    // CIRCUIT_FAILURE_THRESHOLD defaults to 5 consecutive failed calls.
    for (let i = 0; i < 5; i++) {
      const res = await api("POST", `/api/invoke/${bad.id}`, { key: buyer.apiKey, body: { input: {} } });
      expect(errorCode(res)).toBe("PROVIDER_FAILED");
    }
    expect(failing.calls).toHaveLength(5);
    const match = await api("GET", `/api/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(match.body.excluded).toEqual([
      expect.objectContaining({ listing_id: bad.id, reason: "circuit_open" }),
    ]);
    const routed = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(routed.body.output).toEqual({ from: "healthy" });
    const direct = await api("POST", `/api/invoke/${bad.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect([direct.status, errorCode(direct)]).toEqual([503, "PROVIDER_UNAVAILABLE"]);
    expect(failing.calls).toHaveLength(5);
  });

  it("a listing that joined a task since its last read has its circuit read too (the rest read beside the listings)", async () => {
    const task = taskName();
    const healthy = await seller(ok({ from: "healthy" }));
    const failing = await seller(broken);
    await buildListing({ endpointUrl: healthy.url, tags: [task] });
    // This process now knows the task's listings: the next execute reads their circuits ahead.
    const first = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(first.body.output).toEqual({ from: "healthy" });
    const joined = await buildListing({
      endpointUrl: failing.url,
      tags: [task],
      verificationStatus: "verified",
      safeToRetry: false,
    });
    for (let i = 0; i < 5; i++) {
      await api("POST", `/api/invoke/${joined.id}`, { key: buyer.apiKey, body: { input: {} } });
    }
    const routed = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(routed.body.output).toEqual({ from: "healthy" });
    // Left out by ranking with its reason, not chosen first and then refused by the call gate.
    expect(routed.body.selection.excluded).toEqual([{ listing_id: joined.id, reason: "circuit_open" }]);
  });

  it("ranking adapts: a top listing that fails loses its place to one that succeeds", async () => {
    const task = taskName();
    const failing = await seller(broken);
    const healthy = await seller(ok({ from: "healthy" }));
    await buildListing({
      endpointUrl: failing.url,
      tags: [task],
      verificationStatus: "verified",
      safeToRetry: false,
    });
    const good = await buildListing({ endpointUrl: healthy.url, tags: [task] });
    await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    const match = await api("GET", `/api/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(match.body.candidates[0].listing_id).toBe(good.id);
  });
});

describe("metering", () => {
  it("per-listing counters and latency come out exact under 30 concurrent calls", async () => {
    const task = taskName();
    const s = await seller(ok({}));
    // Room for all 30 at once: the default concurrency_limit (10) would refuse some, rightly.
    const listing = await buildListing({ endpointUrl: s.url, tags: [task], concurrencyLimit: 30 });
    const results = await Promise.all(
      Array.from({ length: 30 }, () =>
        api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } }),
      ),
    );
    // Each answers 200, or 202 while it still runs when a loaded machine runs out the execute's wait for
    // its result (EXECUTE_SYNC_WAIT_MS): the counters are read once every call has ended.
    const statuses = results.map((r) => r.status);
    expect(
      statuses.every((s) => s === 200 || s === 202),
      JSON.stringify(statuses),
    ).toBe(true);
    const ids = results.map((r) => r.body.invocation_id as string);
    await waitFor(
      "every call to end",
      async () => (await db()("invocations").whereIn("id", ids).where({ status: "succeeded" })).length === 30,
    );
    const record = (await api("GET", `/api/capabilities/${listing.id}`)).body;
    expect(record).toMatchObject({
      total_invocations: 30,
      success_count: 30,
      failure_count: 0,
      success_rate: 1,
    });
    expect(record.avg_latency_ms).toBeGreaterThanOrEqual(0);
    expect(record.telemetry.p50_latency_ms).not.toBeNull();
    expect(record.public_proof_status).toBe("proven_in_use");
  });
});

describe("self-dealing", () => {
  it("an agent's own listings never route to it, and invoking one is 403 SELF_DEALING_FORBIDDEN", async () => {
    const task = taskName();
    const s = await seller(ok({ served: true }));
    const seller1 = await buildAgent();
    const own = await buildListing({ endpointUrl: s.url, tags: [task], sellerId: seller1.agentId });
    const other = await buildListing({ endpointUrl: s.url, tags: [task] });

    const match = await api("GET", `/api/execute/match?task=${task}`, { key: seller1.apiKey });
    expect(match.body.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([other.id]);
    expect(match.body.excluded).toEqual([
      expect.objectContaining({ listing_id: own.id, reason: "own_listing" }),
    ]);

    const routed = await api("POST", "/api/execute", { key: seller1.apiKey, body: { task, input: {} } });
    expect(routed.status).toBe(200);
    expect(routed.body.served_listing_id).toBe(other.id);

    const callsBefore = s.calls.length;
    const invoked = await api("POST", `/api/invoke/${own.id}`, { key: seller1.apiKey, body: { input: {} } });
    expect(invoked.status).toBe(403);
    expect(invoked.body.error).toMatchObject({
      code: "SELF_DEALING_FORBIDDEN",
      retryable: false,
      details: { listing_id: own.id, reason: "own_listing" },
    });
    // Only its own listing answers: refused as self-dealing, not "not found".
    const onlyOwnTask = taskName();
    await buildListing({ endpointUrl: s.url, tags: [onlyOwnTask], sellerId: seller1.agentId });
    const onlyOwn = await api("POST", "/api/execute", {
      key: seller1.apiKey,
      body: { task: onlyOwnTask, input: {} },
    });
    expect(onlyOwn.status).toBe(403);
    expect(errorCode(onlyOwn)).toBe("SELF_DEALING_FORBIDDEN");
    expect(s.calls.length).toBe(callsBefore);
    expect(await db()("invocations").where({ agent_id: seller1.agentId, listing_id: own.id })).toHaveLength(
      0,
    );

    // Anyone else may buy it.
    const bought = await api("POST", `/api/invoke/${own.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(bought.status).toBe(200);
  });
});
