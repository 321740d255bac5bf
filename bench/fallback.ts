import { randomBytes } from "node:crypto";
import http from "node:http";
import knexFactory, { type Knex } from "knex";
import { probeHeaderName } from "../shared/routing/index.js";
import { fixed, percentile, table } from "./lib.js";

/**
 * The "one fallback" scenario of `npm run bench:execute`: what POST /api/execute costs when the
 * top-ranked provider fails and the next one serves, against the same trio with a healthy top provider.
 * The router learns (a failed listing loses rank at once, its circuit opens after
 * CIRCUIT_FAILURE_THRESHOLD failures), so every request gets a fresh trio of listings under a fresh
 * tag: A verified (ranked first while nobody has history), B and C unverified (B older, so second).
 * Sequential, fallback and control requests alternating, each timed around its HTTP call only.
 */

const REQUESTS = Number(process.env.BENCH_FALLBACK_REQUESTS ?? 200);
const WARM_UP = 20;
const SLUG_PREFIX = "bench-fb-";
const FALLBACK_REASON = "fallback_after_higher_ranked_candidate_failed";
const TOP_REASON = "top_ranked_candidate";

export interface FallbackContext {
  baseUrl: string;
  apiKey: string;
  /** The DATABASE_URL the service was given; the bench inserts its listings there. */
  databaseUrl: string;
  log(message?: string): void;
  loud(message: string): void;
}

interface Seller {
  url: string;
  /** Calls made for invocations. */
  calls: number;
  /** The service's health probes, counted apart: its sweep may probe the run's listings meanwhile. */
  probes: number;
  close(): Promise<void>;
}

/** A seller on 127.0.0.1, port 0, that answers every request at once with the same status and body. */
async function startSeller(status: number, body: unknown): Promise<Seller> {
  const payload = JSON.stringify(body);
  const seller = { url: "", calls: 0, probes: 0, close: async () => {} };
  // A health probe carries the probe header (the service under test shares this process's PLATFORM_ID).
  const probeHeader = probeHeaderName();
  const server = http.createServer((req, res) => {
    if (req.headers[probeHeader] !== undefined) seller.probes += 1;
    else seller.calls += 1;
    req.resume();
    req.on("end", () => res.writeHead(status, { "content-type": "application/json" }).end(payload));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  seller.url = `http://127.0.0.1:${address.port}/call`;
  seller.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return seller;
}

/** One POST on a keep-alive agent, timed from the request to the last byte of the answer. */
function timedPost(
  agent: http.Agent,
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; ms: number }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(
      url,
      { method: "POST", agent, headers: { "content-type": "application/json", ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const ms = performance.now() - started;
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown = text;
          try {
            json = JSON.parse(text);
          } catch {
            // Not JSON: kept as text for the mismatch report.
          }
          resolve({ status: res.statusCode ?? 0, json, ms });
        });
        res.on("error", reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error("no answer within 30 s")));
    req.on("error", reject);
    req.end(data);
  });
}

type Kind = "fallback" | "control";

interface Trio {
  tag: string;
  ids: [string, string, string];
}

/** Three listings under one fresh tag, rows shaped like test/helpers/factories.ts buildListing. */
async function insertTrio(knex: Knex, urls: [string, string, string]): Promise<Trio> {
  const tag = `${SLUG_PREFIX}${randomBytes(6).toString("hex")}`;
  const now = Date.now();
  const rows = urls.map((url, i) => ({
    slug: `${tag}-${"abc"[i]}`,
    name: `Bench fallback ${tag} ${"ABC"[i]}`,
    description: "created by bench:execute (one fallback)",
    category: "bench",
    endpoint_url: url,
    price_micros: "0",
    input_schema: { type: "object" },
    output_schema: null,
    tags: [tag],
    safe_to_retry: false,
    max_latency_ms: 30000,
    status: "active",
    featured: false,
    verification_status: i === 0 ? "verified" : null,
    seller_id: null,
    rate_limit: 100,
    concurrency_limit: 10,
    // Distinct ages: B and C tie on score and price, and the older one ranks first.
    created_at: new Date(now + i),
  }));
  const inserted: { id: string; slug: string }[] = await knex("listings")
    .insert(rows)
    .returning(["id", "slug"]);
  const byId = new Map(inserted.map((r) => [r.slug, r.id]));
  return { tag, ids: rows.map((r) => byId.get(r.slug)!) as [string, string, string] };
}

interface Series {
  kind: Kind;
  label: string;
  sellers: [string, string, string];
  latencies: number[];
  invocations: string[];
  mismatches: number;
  samples: string[];
}

async function runOne(knex: Knex, ctx: FallbackContext, agent: http.Agent, s: Series, record: boolean) {
  const trio = await insertTrio(knex, s.sellers);
  const res = await timedPost(
    agent,
    `${ctx.baseUrl}/api/execute`,
    { task: trio.tag, input: {} },
    { authorization: `Bearer ${ctx.apiKey}` },
  );
  const [expectedId, expectedReason] =
    s.kind === "fallback" ? [trio.ids[1], FALLBACK_REASON] : [trio.ids[0], TOP_REASON];
  const provider = res.json?.provider;
  if (
    res.status !== 200 ||
    provider?.listing_id !== expectedId ||
    provider?.selection_reason !== expectedReason
  ) {
    s.mismatches += 1;
    const who = ["A", "B", "C"][trio.ids.indexOf(provider?.listing_id)] ?? String(provider?.listing_id);
    if (s.samples.length < 3)
      s.samples.push(
        `HTTP ${res.status}, served by ${who}, ${provider?.selection_reason}: ` +
          JSON.stringify(res.json).slice(0, 300),
      );
    return;
  }
  if (record) {
    s.latencies.push(res.ms);
    s.invocations.push(res.json.invocation_id);
  }
}

/** The seller alone, called straight from the bench: what the failed call itself costs on the wire. */
async function timeSeller(url: string, n: number): Promise<Float64Array> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const out: number[] = [];
  for (let i = 0; i < n + WARM_UP; i++) {
    const res = await timedPost(agent, url, { input: {} });
    if (i >= WARM_UP) out.push(res.ms);
  }
  agent.destroy();
  return Float64Array.from(out).sort();
}

/** Medians of the worker's own timestamps, per phase, over the measured invocations (ms). */
async function phases(knex: Knex, invocations: string[]) {
  const ms = (a: string, b: string) => `extract(epoch from (${b} - ${a})) * 1000`;
  const median = (expr: string) => `percentile_cont(0.5) within group (order by ${expr})`;
  const result = await knex.raw(
    `with a as (
       select invocation_id,
              max(started_at) filter (where attempt_no = 1) as s1,
              max(finished_at) filter (where attempt_no = 1) as f1,
              max(started_at) filter (where attempt_no = 2) as s2,
              max(finished_at) filter (where attempt_no = 2) as f2
         from invocation_attempts where invocation_id = any(?::uuid[]) group by invocation_id)
     select ${median(ms("s1", "f1"))} as first, ${median(ms("f1", "s2"))} as gap,
            ${median(ms("s2", "f2"))} as second from a`,
    [invocations],
  );
  const row = result.rows[0] as { first: number | null; gap: number | null; second: number | null };
  const n = (v: number | null) => (v === null ? Number.NaN : Number(v));
  return { first: n(row.first), gap: n(row.gap), second: n(row.second) };
}

const series = (kind: Kind, label: string, sellers: [string, string, string]): Series => ({
  kind,
  label,
  sellers,
  latencies: [],
  invocations: [],
  mismatches: 0,
  samples: [],
});

const pair = (sorted: Float64Array) => [fixed(percentile(sorted, 50)), fixed(percentile(sorted, 99))];

export async function runFallbackBench(ctx: FallbackContext): Promise<void> {
  if (!Number.isInteger(REQUESTS) || REQUESTS <= 0)
    throw new Error("BENCH_FALLBACK_REQUESTS must be a positive whole number");
  const knex = knexFactory({ client: "pg", connection: ctx.databaseUrl, pool: { min: 0, max: 2 } });
  const failing = await startSeller(500, { error: "boom" });
  const healthy = await startSeller(200, { success: true, output: { ok: true } });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  // Active bench listings would only be probed by later runs' sweeps: retire them (the rows stay),
  // before (an interrupted run's) and after.
  const retire = () =>
    knex("listings")
      .where("slug", "like", `${SLUG_PREFIX}%`)
      .andWhere({ status: "active" })
      .update({ status: "retired", retired_at: knex.fn.now() });
  try {
    await retire();
    const control = series("control", "control: A healthy, served by A", [
      healthy.url,
      healthy.url,
      healthy.url,
    ]);
    const fallback = series("fallback", "fallback: A answers 500, served by B", [
      failing.url,
      healthy.url,
      healthy.url,
    ]);
    ctx.log(
      `measuring one fallback: ${REQUESTS} sequential POST /api/execute per scenario, alternating, ` +
        `after ${WARM_UP} warm-up each; a fresh trio of listings per request…`,
    );
    for (let i = 0; i < WARM_UP + REQUESTS; i++) {
      for (const s of [control, fallback]) await runOne(knex, ctx, agent, s, i >= WARM_UP);
    }
    const failingCalls = failing.calls;
    const failingProbes = failing.probes;
    report(ctx, control, fallback, {
      failingAlone: await timeSeller(failing.url, REQUESTS),
      healthyAlone: await timeSeller(healthy.url, REQUESTS),
      controlPhases: await phases(knex, control.invocations),
      fallbackPhases: await phases(knex, fallback.invocations),
    });
    if (failingProbes > 0)
      ctx.log(
        `  (the service's health sweep probed the failing seller ${failingProbes} times meanwhile; not calls)`,
      );
    const expectedCalls = WARM_UP + REQUESTS;
    if (failingCalls !== expectedCalls)
      ctx.loud(
        `the failing seller was called ${failingCalls} times, expected ${expectedCalls} (once per run; its ${failingProbes} health probes not counted)`,
      );
  } finally {
    await retire().catch(() => {});
    agent.destroy();
    await failing.close();
    await healthy.close();
    await knex.destroy();
  }
}

function report(
  { log, loud }: FallbackContext,
  control: Series,
  fallback: Series,
  extra: {
    failingAlone: Float64Array;
    healthyAlone: Float64Array;
    controlPhases: Awaited<ReturnType<typeof phases>>;
    fallbackPhases: Awaited<ReturnType<typeof phases>>;
  },
): void {
  const c = Float64Array.from(control.latencies).sort();
  const f = Float64Array.from(fallback.latencies).sort();
  log();
  log("One fallback (sequential, c=1; latency counts answers served as expected only)");
  log(
    table(
      ["scenario", "requests", "p50 ms", "p99 ms", "mismatches"],
      [
        [control.label, String(c.length), ...pair(c), String(control.mismatches)],
        [fallback.label, String(f.length), ...pair(f), String(fallback.mismatches)],
        ["failing seller alone (HTTP 500, direct)", String(REQUESTS), ...pair(extra.failingAlone), "-"],
        ["healthy seller alone (direct)", String(REQUESTS), ...pair(extra.healthyAlone), "-"],
      ],
    ),
  );
  log();
  const added = percentile(f, 50) - percentile(c, 50);
  log(`  latency one fallback adds (p50 fallback − p50 control): ${fixed(added)} ms`);
  const { controlPhases: cp, fallbackPhases: fp } = extra;
  log("  inside the worker (medians of invocation_attempts timestamps):");
  log(`    control   attempt 1 (A): claimed → success recorded           ${fixed(cp.first)} ms`);
  log(`    fallback  attempt 1 (A): claimed → failure recorded           ${fixed(fp.first)} ms`);
  log(`              failure recorded → attempt 2 (B) started            ${fixed(fp.gap)} ms`);
  log(`              attempt 2 (B): started → success recorded           ${fixed(fp.second)} ms`);
  for (const s of [control, fallback]) {
    if (s.mismatches === 0) continue;
    loud(`${s.label}: ${s.mismatches} answer(s) not served as expected (warm-up included):`);
    for (const sample of s.samples) loud(`  ${sample}`);
  }
  if (control.mismatches + fallback.mismatches > 0)
    loud("THE FALLBACK SCENARIO SAW MISMATCHES: its numbers do not describe one clean fallback.");
}
