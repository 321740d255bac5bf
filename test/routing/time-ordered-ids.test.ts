import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { newTimeOrderedId, timeOrderedIdFloor } from "../../shared/kernel/ids.js";
import { listAttempts } from "../../shared/routing/store/invocations.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// The rows every call writes get UUIDv7 ids (shared/kernel/ids.ts, migrations/20261130000100): 48 bits of
// Unix milliseconds first, so their B-tree indexes grow at the right edge and a checkpoint costs one full
// page image per index, not one per insert (docs/benchmarks.md "The twelfth round").

let buyer: TestAgent;
let service: TestService;

beforeAll(async () => {
  buyer = await buildAgent();
  service = await startService();
});
afterAll(async () => service.stop());

/** The Unix milliseconds of a UUIDv7, after checking its version and variant. */
function v7Millis(id: string): number {
  expect(id, id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  return Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);
}

async function executeIds(): Promise<{ invocation: string; attempt: string; receipt: string }> {
  const res = await api("POST", "/api/execute", {
    key: buyer.apiKey,
    body: { task: "echo", input: { n: 1 } },
  });
  expect(res.status).toBe(200);
  const invocation = res.body.invocation_id as string;
  const [attempt] = await listAttempts(db(), invocation);
  return { invocation, attempt: attempt!.id, receipt: res.body.receipt_id as string };
}

it("gives an execute's invocation, attempt and receipt ids that carry their time and sort in it", async () => {
  const before = Date.now();
  const first = await executeIds();
  await new Promise((resolve) => setTimeout(resolve, 5));
  const second = await executeIds();
  const after = Date.now();
  for (const ids of [first, second])
    for (const id of Object.values(ids)) {
      const millis = v7Millis(id);
      // The database's clock and ours agree to well within a second on one machine.
      expect(millis).toBeGreaterThanOrEqual(before - 1000);
      expect(millis).toBeLessThanOrEqual(after + 1000);
    }
  // A later call's ids sort after an earlier one's, as uuids and as text.
  for (const kind of ["invocation", "attempt", "receipt"] as const)
    expect(second[kind] > first[kind], `${kind}: ${first[kind]} then ${second[kind]}`).toBe(true);
});

it("makes ids that stay distinct within one millisecond", () => {
  const ids = Array.from({ length: 1000 }, () => newTimeOrderedId());
  expect(new Set(ids).size).toBe(1000);
  for (const id of ids.slice(0, 5)) v7Millis(id);
});

it("puts the floor of a moment at or below every id made from then on, and above every id made before", async () => {
  const at = new Date();
  const floor = timeOrderedIdFloor(at);
  expect(v7Millis(uuidv7({ msecs: at.getTime() }))).toBe(at.getTime());
  const since = [uuidv7({ msecs: at.getTime() }), uuidv7({ msecs: at.getTime() + 1 }), newTimeOrderedId()];
  const before = [uuidv7({ msecs: at.getTime() - 1 }), uuidv7({ msecs: at.getTime() - 60_000 })];
  // PostgreSQL's order of uuids, which the recovery sweep's `id >= floor` range relies on.
  const { rows } = await db().raw("select id::text, id >= ?::uuid as since from unnest(?::uuid[]) as id", [
    floor,
    [...since, ...before],
  ]);
  expect(Object.fromEntries(rows.map((r: { id: string; since: boolean }) => [r.id, r.since]))).toEqual(
    Object.fromEntries([...since.map((id) => [id, true]), ...before.map((id) => [id, false])]),
  );
});
