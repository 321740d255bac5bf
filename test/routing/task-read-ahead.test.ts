import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeCommandRedis } from "../../shared/redis.js";
import { readTaskListings } from "../../shared/routing/index.js";
import { buildListing } from "../helpers/factories.js";

// readTaskListings reads a task's circuits beside its listings, from the ids the task had at its last
// read in this process. Tasks match case- and space-insensitively, so the ids are remembered that way.

afterAll(async () => closeCommandRedis());

describe("readTaskListings read-ahead", () => {
  it("reads circuits ahead for a task last read under another case or spacing", async () => {
    const slug = `read-ahead-${randomBytes(4).toString("hex")}`;
    const listing = await buildListing({ endpointUrl: "http://127.0.0.1:9/invoke", slug });

    const first = readTaskListings(` ${slug.toUpperCase()} `);
    expect(first.circuits).toBeUndefined();
    expect((await first.listings).map((l) => l.id)).toEqual([listing.id]);

    const again = readTaskListings(slug);
    expect(again.circuits?.ids).toEqual(new Set([listing.id]));
    expect(await again.circuits?.open).toEqual(new Set());
    expect((await again.listings).map((l) => l.id)).toEqual([listing.id]);
  });
});
