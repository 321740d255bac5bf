import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { runtimeProofDue, runtimeProofRecorded } from "../../shared/routing/runtime-proof.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// A success refreshes its listing's runtime proof (last_success_at) at most once a minute; the process
// leaves the update out of the successes in between (shared/routing/runtime-proof.ts).

let service: TestService;
let buyer: TestAgent;
let seller: TestSeller;

beforeAll(async () => {
  service = await startService();
  buyer = await buildAgent();
  seller = await startSeller((_call, res) => json(res, 200, { ok: true }));
});
afterAll(async () => {
  await seller.close();
  await service.stop();
});

const lastSuccess = async (id: string): Promise<Date | null> =>
  (await db()("listings").where({ id }).first("last_success_at")).last_success_at;

describe("the runtime proof", () => {
  it("is due for a listing never proved here, and again a minute after it was", () => {
    const id = `listing-${randomBytes(4).toString("hex")}`;
    expect(runtimeProofDue(id, 1_000_000)).toBe(true);
    runtimeProofRecorded(id, 1_000_000);
    expect(runtimeProofDue(id, 1_000_000 + 59_999)).toBe(false);
    expect(runtimeProofDue(id, 1_000_000 + 60_000)).toBe(true);
  });

  it("is written by a listing's first success, left alone within the minute, and written once it is due", async () => {
    const task = `proof-${randomBytes(4).toString("hex")}`;
    const listing = await buildListing({ endpointUrl: seller.url, tags: [task] });
    const execute = async () =>
      expect(
        (await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } })).status,
      ).toBe(200);
    expect(await lastSuccess(listing.id)).toBeNull();
    await execute();
    const first = await lastSuccess(listing.id);
    expect(first).not.toBeNull();

    // Older than a minute in the database, but proved by this process within the minute: left alone.
    await db()("listings")
      .where({ id: listing.id })
      .update({ last_success_at: db().raw("now() - interval '2 minutes'") });
    const aged = await lastSuccess(listing.id);
    await execute();
    expect(await lastSuccess(listing.id)).toEqual(aged);

    // Due here again: the next success writes it.
    runtimeProofRecorded(listing.id, Date.now() - 61_000);
    await execute();
    expect((await lastSuccess(listing.id))!.getTime()).toBeGreaterThan(aged!.getTime());
  });
});
