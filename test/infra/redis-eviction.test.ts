import { type ChildProcess, spawn } from "node:child_process";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../shared/infra/free-port.js";
import { evictionProblem, readEvictionPolicy } from "../../shared/infra/redis-policy.js";
import { startProcess } from "../helpers/processes.js";
import { TEST_DATABASE_URL } from "../helpers/test-env.js";

// The start-up check (docs/operations.md "Redis"): a Redis that may evict keys would lose BullMQ's
// jobs, so the web and worker processes refuse it with one line and exit 1. Against redis-servers this
// file starts itself: one with allkeys-lru, one that also forbids CONFIG (as managed Redis does).

const servers: ChildProcess[] = [];

async function redisServer(args: string[]): Promise<string> {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...args],
    { stdio: "ignore" },
  );
  servers.push(child);
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      return url;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      probe.disconnect();
    }
  }
  throw new Error("redis-server did not start");
}

let evicting: string;
let noConfig: string;
let fine: string;

beforeAll(async () => {
  [evicting, noConfig, fine] = await Promise.all([
    redisServer(["--maxmemory-policy", "allkeys-lru"]),
    redisServer(["--maxmemory-policy", "volatile-lru", "--rename-command", "CONFIG", '""']),
    redisServer(["--maxmemory-policy", "noeviction"]),
  ]);
});

afterAll(() => {
  for (const s of servers) s.kill("SIGKILL");
});

describe("the eviction-policy check", () => {
  it("reads the policy with CONFIG, or from INFO memory where CONFIG is forbidden", async () => {
    for (const [url, expected] of [
      [evicting, "allkeys-lru"],
      [noConfig, "volatile-lru"],
      [fine, "noeviction"],
    ] as const) {
      const redis = new Redis(url);
      try {
        expect(await readEvictionPolicy(redis)).toBe(expected);
      } finally {
        redis.disconnect();
      }
    }
    const forbidden = new Redis(noConfig);
    await expect(forbidden.config("GET", "maxmemory-policy")).rejects.toThrow(/unknown command/i);
    forbidden.disconnect();
    expect(await evictionProblem(fine)).toBeUndefined();
    expect(await evictionProblem(noConfig)).toMatch(
      /maxmemory-policy is volatile-lru, BullMQ needs noeviction/,
    );
  });

  it("the web process and a worker process refuse an evicting Redis: one line, exit 1", async () => {
    const env = {
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: evicting,
      PORT: String(await freePort()),
      LOG_LEVEL: "info",
    };
    for (const [script, args] of [
      ["dist/api/main.js", []],
      ["dist/workers/main.js", ["payouts"]],
    ] as const) {
      const run = startProcess(script, [...args], env);
      expect(await run.exited, script).toBe(1);
      const lines = run.output().trim().split("\n");
      expect(lines, script).toEqual([
        expect.stringMatching(
          /^refusing to start: Redis maxmemory-policy is allkeys-lru, BullMQ needs noeviction/,
        ),
      ]);
    }
  });

  it("REDIS_EVICTION_CHECK=false lets a worker start anyway (the operator's explicit choice)", async () => {
    const run = startProcess("dist/workers/main.js", ["payouts"], {
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: evicting,
      REDIS_EVICTION_CHECK: "false",
      LOG_LEVEL: "info",
    });
    try {
      await expect.poll(() => run.output(), { timeout: 15_000 }).toContain("workers started");
    } finally {
      run.child.kill("SIGTERM");
      await run.exited;
    }
  });
});
