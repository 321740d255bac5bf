import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { ERROR_CODES } from "../../shared/errors.js";
import { getQueue } from "../../shared/queues.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { type FuzzContext, type FuzzRequest, operationsOf, requestsFor } from "../helpers/fuzz.js";
import { api } from "../helpers/http.js";
import { fundedAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { waitFor } from "../helpers/processes.js";
import { contractViolation } from "../helpers/response-contract.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// Fuzzes every route of the OpenAPI document the service serves (docs/reliability.md "Fuzz"): at least
// 10,000 requests, valid and mutated. The promises: no 5xx; every refusal is the one error envelope
// with a code of our error table; every answer keeps the route's OpenAPI declaration; a refused request
// writes no row (every table counted before and after it, read again whenever WAL was written); the
// service is healthy afterwards.
//
// The API runs without an executions worker or sweeper while fuzzing, so nothing writes in the
// background and a changed count can only come from the request itself; a live paid gate (local chain)
// so paid routes are reached rather than refused at the gate.

const MIN_REQUESTS = 10_000;
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let ctx: FuzzContext;
let countSql: string;

beforeAll(async () => {
  ownDb = await useOwnDatabase("fuzz");
  chain = await startLocalChain();
  await usePaidChain(chain);
  // Executions go through the queue, which the test pauses below: nothing may run in the background.
  service = await startService({ sweeper: false, runHere: false });
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  const sellerAgent = await buildAgent("seller");
  const buyer = await fundedAgent(100);
  const foreign = await fundedAgent(1);
  const paid = await buildListing({ endpointUrl: seller.url, price: 0.01, sellerId: sellerAgent.agentId });
  const free = await buildListing({ endpointUrl: seller.url });
  // Real ids of each kind, so mutated requests reach past the "not found" of a random id.
  const ran = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task: free.slug, input: {} } });
  const quote = await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: paid.id } });
  const spare = await api("POST", "/api/keys", { key: buyer.apiKey, body: { name: "fuzz-spare" } });
  expect([ran.status, quote.status, spare.status]).toEqual([200, 201, 201]);
  const order = await api("POST", "/api/verification/orders", {
    key: buyer.apiKey,
    body: { target: seller.url, protocol: "http-json" },
  });
  const connector = await api("POST", "/api/connectors", {
    key: buyer.apiKey,
    body: { connector_type: "trading_connector", mcp_server_name: "trading-connector" },
  });
  expect([order.status, connector.status]).toEqual([202, 201]);
  const foreignRun = await api("POST", "/api/execute", {
    key: foreign.apiKey,
    body: { task: free.slug, input: {} },
  });
  ctx = {
    key: buyer.apiKey,
    foreignKey: foreign.apiKey,
    bodyLimit: getConfig().requestBodyMaxBytes,
    ids: {
      listing_id: [paid.id, free.id],
      id: [paid.id, free.id, paid.slug],
      invocation_id: [ran.body.invocation_id, foreignRun.body.invocation_id],
      receipt_id: [ran.body.receipt_id, foreignRun.body.receipt_id],
      quote_id: [quote.body.quote_id],
      key_id: [spare.body.key.id ?? spare.body.key.key_id],
      order_id: [order.body.order_id],
      connector_id: [connector.body.connector_id],
    },
  };
  // From here on nothing runs in the background: no worker, no sweeper; executes answer 202 at once.
  // The worker stays registered (health counts it) but the queue is paused, so no job runs (a paused
  // worker may still take the job its blocking fetch already returned); nothing may be active.
  await getQueue("executions").pause();
  await waitFor("no active execution", async () => (await getQueue("executions").getActiveCount()) === 0);
  overrideConfig({ executeSyncWaitMs: 0 });
  const tables = await db().raw(
    "select tablename from pg_tables where schemaname = 'public' and tablename not like 'knex_%' order by tablename",
  );
  countSql = `select ${tables.rows.map((r: { tablename: string }) => `(select count(*) from "${r.tablename}") as "${r.tablename}"`).join(", ")}`;
}, 60_000);

afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

/** Every table's row count as last read, and where PostgreSQL's WAL stood once they were read. */
let known: { counts: Record<string, string>; wal: string } | undefined;

/**
 * Every table's row count now. A row written always writes WAL (no table of ours is unlogged), so while
 * the WAL's insert position has not moved since the counts were read, they still hold and are not read
 * again: counting every table before and after each write request was most of this test's time. The
 * position is read after the counts, so WAL the counting itself writes (pruning a page it reads) is
 * behind it. Nothing else writes meanwhile (no worker, no sweeper), as comparing counts around a
 * request always needed.
 */
async function counts(): Promise<Record<string, string>> {
  const wal = async () => (await db().raw("select pg_current_wal_insert_lsn()::text as at")).rows[0].at;
  if (known && known.wal === (await wal())) return known.counts;
  const now = (await db().raw(countSql)).rows[0] as Record<string, string>;
  known = { counts: now, wal: await wal() };
  return now;
}

function changed(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(after)
    .filter((t) => before[t] !== after[t])
    .map((t) => `${t} ${before[t]}→${after[t]}`);
}

interface Finding {
  request: string;
  problem: string;
}

const describeRequest = (r: FuzzRequest) =>
  `${r.kind} ${r.method} ${r.path.slice(0, 160)} (from ${r.operation})`;

describe("fuzzing every route of the OpenAPI document", () => {
  it(`${MIN_REQUESTS}+ valid and mutated requests: no 5xx, every refusal in the envelope, no row written by a refusal`, async () => {
    const doc = (await api("GET", "/openapi.json")).body;
    const operations = operationsOf(doc);
    // Pages for people (docs/operations.md "Pages") answer their refusals as HTML pages, not the JSON
    // envelope: a browser shows them. Every other route refuses with the envelope.
    const pages = new Set<string>();
    for (const [template, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>))
      for (const [method, op] of Object.entries(methods))
        if (Object.values(op.responses ?? {}).some((r: any) => r.content?.["text/html"]))
          pages.add(`${method.toUpperCase()} ${template}`);
    expect(pages.size).toBeGreaterThan(0);
    expect(operations.length).toBeGreaterThan(50);
    const base = `http://127.0.0.1:${getConfig().port}`;
    const findings: Finding[] = [];
    const byKind = new Map<string, { sent: number; refused: number }>();
    const statuses = new Map<number, number>();
    let sent = 0;
    for (let round = 0; sent < MIN_REQUESTS; round++) {
      for (const [i, op] of operations.entries()) {
        for (const r of requestsFor(op, ctx, round * 1000 + i)) {
          const write = r.method !== "GET" && r.method !== "HEAD" && r.method !== "OPTIONS";
          const before = write ? await counts() : undefined;
          const res = await request(`${base}${r.path}`, {
            method: r.method,
            headers: r.headers,
            body: r.body,
          });
          const text = await res.body.text();
          sent++;
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          const tally = byKind.get(r.kind) ?? { sent: 0, refused: 0 };
          tally.sent++;
          const problem = (p: string) => findings.push({ request: describeRequest(r), problem: p });
          const type = String(res.headers["content-type"] ?? "");
          let body: unknown;
          try {
            body = type.includes("json") && text ? JSON.parse(text) : text;
          } catch {
            problem(`${res.statusCode} with a body that is not the JSON it claims`);
          }
          if (res.statusCode >= 500) problem(`${res.statusCode}: ${text.slice(0, 300)}`);
          if (res.statusCode >= 400) {
            tally.refused++;
            const error = (
              body as { success?: boolean; error?: { code?: string; message?: string; request_id?: string } }
            )?.error;
            const page = pages.has(r.operation) && r.method === r.operation.split(" ")[0];
            if (page) {
              if (!type.includes("text/html") && !type.includes("json"))
                problem(`${res.statusCode} from a page is neither HTML nor the envelope: ${type}`);
            } else if (
              (body as { success?: boolean })?.success !== false ||
              !error?.message ||
              !error.request_id
            )
              problem(`${res.statusCode} outside the error envelope: ${text.slice(0, 200)}`);
            else if (!ERROR_CODES.includes(error.code as never)) problem(`unknown error code ${error.code}`);
            // A 402 challenge at the x402 edge is step one of the protocol, not a refusal: it records the
            // quote it offers (docs/api.md, limited per client address; stale quotes are swept).
            const challenge = res.statusCode === 402 && "payment-required" in res.headers;
            if (before && !challenge) {
              const writes = changed(before, await counts());
              if (writes.length)
                problem(`refused with ${res.statusCode} ${error?.code}, yet wrote ${writes.join(", ")}`);
            }
          }
          const violation = contractViolation(r.method, `${base}${r.path}`, res.statusCode, type, body);
          if (violation) problem(violation);
          byKind.set(r.kind, tally);
        }
      }
    }
    const report = [...byKind.entries()]
      .sort()
      .map(([kind, t]) => `${kind} ${t.sent} (${t.refused} refused)`)
      .join(", ");
    const fivexx = [...statuses.entries()].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
    console.log(
      `fuzz: ${sent} requests over ${operations.length} operations; 5xx: ${fivexx}; by class: ${report}`,
    );
    console.log(`fuzz: statuses ${JSON.stringify(Object.fromEntries([...statuses.entries()].sort()))}`);
    if (findings.length) {
      const file = join(tmpdir(), `fuzz-findings-${process.pid}.json`);
      writeFileSync(file, JSON.stringify(findings, null, 2));
      console.log(`fuzz: ${findings.length} findings written to ${file}`);
    }
    // One of each distinct problem per operation, so the failure reads as a list of bugs.
    const distinct = new Map<string, Finding>();
    for (const f of findings) distinct.set(`${f.request.split(" (from ")[1]} ${f.problem.slice(0, 60)}`, f);
    expect([...distinct.values()].slice(0, 60)).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(MIN_REQUESTS);

    // Healthy afterwards: health answers, and with the worker back a free call runs end to end.
    expect((await api("GET", "/api/health")).status).toBe(200);
    await getQueue("executions").resume();
    overrideConfig({ executeSyncWaitMs: 5000 });
    const after = await api("POST", "/api/execute", {
      key: ctx.key,
      body: { task: "echo", input: { message: "after" } },
    });
    expect(after.status).toBe(200);
    expect(after.body.output.echo).toMatchObject({ message: "after" });
  }, 900_000);
});
