import { createHash, randomUUID } from "node:crypto";
import type http from "node:http";
import pg from "pg";
import { Agent, request } from "undici";
import { answer, portArgument, readBody, serveBare } from "../lib/bare-http.js";

/**
 * The floor of a durable router, beside the peer in `npm run bench:execute`: the least that a router
 * keeping our evidence rules pays on this machine, against the same fake provider as Portkey.
 * `node dist/bench/execute/floor.js <port> <upstream URL> <database URL>` serves on 127.0.0.1:
 *
 * - POST /bare: a bare Node proxy. It reads the body, forwards it with undici (pooled, kept alive) to
 *   the upstream URL and answers the upstream's status and body. No framework, no checks.
 * - POST /durable: the same proxy with the two commits every execute makes (docs/routing.md): a row
 *   that claims the call, committed before the call, and the call's outcome (status, HTTP status, the
 *   response's SHA-256), committed before the answer. One narrow row with one index, in a table of its
 *   own in the bench's database (bench_floor_calls), each commit durable (synchronous_commit as the
 *   server has it: on).
 *
 * Neither authenticates, validates, ranks, limits, signs, meters nor keeps receipts: the gap between
 * /durable and our execute is the router's own work, and the gap between /bare and Portkey is Portkey's.
 * Prints "floor ready" once listening.
 */

const USAGE = "node dist/bench/execute/floor.js <port> <upstream URL> <database URL>";
/** The service's pool size (DATABASE_POOL_MAX's default), so that c=32 compares too. */
const POOL_MAX = 10;

const port = portArgument(USAGE);
const [upstreamUrl, databaseUrl] = process.argv.slice(3);
if (!upstreamUrl || !databaseUrl) {
  console.error(`usage: ${USAGE}`);
  process.exit(2);
}

const pool = new pg.Pool({ connectionString: databaseUrl, max: POOL_MAX });
const upstream = new Agent({ keepAliveTimeout: 60_000 });

// Named statements, parsed once per connection, as the service's hot statements are (shared/db/prepared.ts).
const CLAIM = { name: "floor_claim", text: "insert into bench_floor_calls (id, request) values ($1, $2)" };
const OUTCOME = {
  name: "floor_outcome",
  text: `update bench_floor_calls set status = $2, http_status = $3, response_sha256 = $4, finished_at = now()
          where id = $1`,
};

async function forward(body: string): Promise<{ status: number; body: string }> {
  const response = await request(upstreamUrl!, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    dispatcher: upstream,
  });
  return { status: response.statusCode, body: await response.body.text() };
}

async function durable(body: string): Promise<{ status: number; body: string }> {
  const id = randomUUID();
  await pool.query({ ...CLAIM, values: [id, body] });
  const result = await forward(body);
  const sha256 = createHash("sha256").update(result.body).digest("hex");
  const status = result.status >= 200 && result.status < 300 ? "succeeded" : "failed";
  await pool.query({ ...OUTCOME, values: [id, status, result.status, sha256] });
  return result;
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const body = await readBody(req);
  if (req.method !== "POST") return answer(res, 405, '{"error":"POST only"}');
  const route = req.url === "/bare" ? forward : req.url === "/durable" ? durable : undefined;
  if (!route) return answer(res, 404, '{"error":"not found"}');
  const result = await route(body);
  answer(res, result.status, result.body);
}

await pool.query(`create table if not exists bench_floor_calls (
  id uuid primary key,
  request jsonb not null,
  status text not null default 'running',
  http_status integer,
  response_sha256 text,
  created_at timestamptz not null default now(),
  finished_at timestamptz
)`);
await pool.query("truncate bench_floor_calls");
serveBare(port, "floor ready", handle, async () => {
  await pool.query("drop table if exists bench_floor_calls");
  await pool.end();
});
