import { randomUUID } from "node:crypto";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { overrideConfig } from "../../shared/config.js";

// The ranking statistics cache, with the catalog's read replaced by a counter: how often ranking
// reaches PostgreSQL, not what the statistics are (test/api/router.test.ts covers those).

const reads: string[][] = [];
let failNext = false;
vi.mock("../../shared/catalog/index.js", async (original) => ({
  ...(await original<typeof import("../../shared/catalog/index.js")>()),
  readRecentCallStats: vi.fn(async (_q: unknown, ids: string[]) => {
    reads.push(ids);
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (failNext) {
      failNext = false;
      throw new Error("database unavailable");
    }
    return new Map(ids.map((id) => [id, { calls: reads.length, succeeded: 0, p50_latency_ms: null }]));
  }),
}));

const { forgetRankingStats, recentCallStats } = await import("../../shared/routing/ranking-stats.js");

beforeEach(() => {
  reads.length = 0;
  forgetRankingStats();
  overrideConfig({ rankingStatsTtlMs: 200 });
});

describe("ranking statistics cache", () => {
  it("reads a listing once per RANKING_STATS_TTL_MS; after it, answers the stale entry while one refresh runs", async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const first = await recentCallStats([a, b]);
    const second = await recentCallStats([a, b]);
    expect(reads).toEqual([[a, b]]);
    expect(second.get(a)).toEqual(first.get(a));
    await new Promise((resolve) => setTimeout(resolve, 220));
    // Expired: no waiting for the read; the stale figures answer, and a second caller starts no read.
    const third = await recentCallStats([a]);
    const fourth = await recentCallStats([a]);
    expect(third.get(a)?.calls).toBe(1);
    expect(fourth.get(a)?.calls).toBe(1);
    expect(reads).toEqual([[a, b], [a]]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await recentCallStats([a])).get(a)?.calls).toBe(2);
    expect(reads).toHaveLength(2);
  });

  it("keeps the stale entry when its refresh fails, and refreshes again on the next call", async () => {
    const a = randomUUID();
    await recentCallStats([a]);
    await new Promise((resolve) => setTimeout(resolve, 220));
    failNext = true;
    expect((await recentCallStats([a])).get(a)?.calls).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await recentCallStats([a])).get(a)?.calls).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await recentCallStats([a])).get(a)?.calls).toBe(3);
    expect(reads).toHaveLength(3);
  });

  it("reads only the listings it has not seen", async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await recentCallStats([a]);
    await recentCallStats([a, b]);
    expect(reads).toEqual([[a], [b]]);
  });

  it("shares one read among concurrent misses", async () => {
    const a = randomUUID();
    await Promise.all(Array.from({ length: 20 }, () => recentCallStats([a])));
    expect(reads).toHaveLength(1);
  });

  it("does not keep a failed read", async () => {
    const a = randomUUID();
    failNext = true;
    await expect(recentCallStats([a])).rejects.toThrow("database unavailable");
    await recentCallStats([a]);
    expect(reads).toHaveLength(2);
  });

  it("reads every time with RANKING_STATS_TTL_MS=0", async () => {
    overrideConfig({ rankingStatsTtlMs: 0 });
    const a = randomUUID();
    await recentCallStats([a]);
    await recentCallStats([a]);
    expect(reads).toHaveLength(2);
  });
});
