import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../shared/infra/free-port.js";

// An execute's route starts reading the task's listings before it authenticates the key (a route's
// prefetch), so a request refused before its handler runs abandons that read. If the read then fails
// (PostgreSQL restarting: the chaos run's web process met exactly this), its failure must not go
// unhandled: Node ends a process on an unhandled rejection. This file's process points at a port where
// nothing listens, so every read fails at once.

const closed = await freePort();
process.env.DATABASE_URL = `postgres://postgres@127.0.0.1:${closed}/nothing_here`;
const { readTaskListings } = await import("../../shared/routing/index.js");
const { closeDb } = await import("../../shared/db/knex.js");

afterAll(() => closeDb());

describe("a task read nobody awaits", () => {
  it("fails without an unhandled rejection, and still fails for a reader that awaits it", async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    try {
      readTaskListings("echo-abandoned");
      const awaited = readTaskListings("echo-awaited");
      await expect(awaited.listings).rejects.toThrow(/ECONNREFUSED/);
      // Unhandled rejections are reported after the microtask queue drains: give them a few turns.
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", record);
    }
  });
});
