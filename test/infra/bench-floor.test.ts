import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import knexFactory, { type Knex } from "knex";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freePort } from "../../shared/infra/free-port.js";
import { type RunningProcess, startProcess, waitFor } from "../helpers/processes.js";
import { databaseUrl } from "../helpers/test-env.js";

// The floor of a durable router that `npm run bench:execute` measures beside Portkey
// (bench/execute/floor.ts, docs/benchmarks.md "The twelfth round"): its conclusions rest on /durable
// committing a claim before the call and the outcome before the answer, and on /bare touching no
// database. The upstream here is a stub that, when called, reads what the floor has committed.

const COMPLETION = JSON.stringify({ object: "chat.completion", choices: [{ message: { content: "stub" } }] });
const REQUEST = { model: "fake", messages: [{ role: "user", content: "floor" }] };

let admin: Knex;
let knex: Knex;
let name: string;
let upstream: http.Server;
let floor: RunningProcess;
let floorUrl: string;
/** What the floor had committed each time the upstream was called. */
const seenAtCall: { status: string }[][] = [];

beforeAll(async () => {
  name = `agentmarket_floor_${randomBytes(4).toString("hex")}`;
  admin = knexFactory({ client: "pg", connection: databaseUrl("postgres") });
  await admin.raw(`create database "${name}"`);
  knex = knexFactory({ client: "pg", connection: databaseUrl(name) });
  upstream = http.createServer((req, res) => {
    req.resume();
    req.on("end", async () => {
      const rows = await knex.raw("select status from bench_floor_calls").catch(() => ({ rows: [] }));
      seenAtCall.push(rows.rows);
      res.writeHead(200, { "content-type": "application/json" }).end(COMPLETION);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1/chat/completions`;
  const port = await freePort();
  floor = startProcess("dist/bench/execute/floor.js", [String(port), upstreamUrl, databaseUrl(name)], {});
  await waitFor("the floor to listen", async () => floor.output().includes("floor ready"));
  floorUrl = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  if (floor && floor.child.exitCode === null) floor.child.kill("SIGKILL");
  await knex?.destroy();
  await new Promise((resolve) => upstream?.close(resolve));
  await admin?.raw(`drop database if exists "${name}" with (force)`);
  await admin?.destroy();
});

async function post(path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${floorUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(REQUEST),
  });
  return { status: res.status, body: await res.text() };
}

it("proxies /bare to the upstream and writes nothing", async () => {
  seenAtCall.length = 0;
  expect(await post("/bare")).toEqual({ status: 200, body: COMPLETION });
  expect(seenAtCall).toEqual([[]]);
  expect((await knex("bench_floor_calls").count({ n: "*" }))[0]!.n).toBe("0");
});

it("commits the claim before the call and the outcome before the answer on /durable", async () => {
  seenAtCall.length = 0;
  expect(await post("/durable")).toEqual({ status: 200, body: COMPLETION });
  // When the upstream was called, the claim was already visible to another connection: committed.
  expect(seenAtCall).toEqual([[{ status: "running" }]]);
  // When the answer came, the outcome was committed with the response's digest.
  const rows = await knex("bench_floor_calls").select("status", "http_status", "response_sha256", "request");
  expect(rows).toEqual([
    {
      status: "succeeded",
      http_status: 200,
      response_sha256: createHash("sha256").update(COMPLETION).digest("hex"),
      request: REQUEST,
    },
  ]);
});

it("drops its table and exits 0 on SIGTERM", async () => {
  floor.child.kill("SIGTERM");
  expect(await floor.exited).toBe(0);
  const left = await knex.raw("select to_regclass('bench_floor_calls') as t");
  expect(left.rows[0].t).toBeNull();
});
