import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import { KeyCache } from "../../shared/identity/key-cache.js";
import { UNRESTRICTED } from "../../shared/identity/key-policy.js";
import { InvalidationBus } from "../../shared/invalidation.js";

// The key cache and the invalidation bus it is told through, as two API processes would hold them: two
// buses on one channel stand for two processes (the two-process run through HTTP is in
// test/api/keys.test.ts "revocation in every API process").

const WINDOW_MS = 150;
const started: InvalidationBus[] = [];

function apiProcess(channel: string): { bus: InvalidationBus; keys: KeyCache } {
  const bus = new InvalidationBus({ redisUrl: getConfig().redisUrl!, channel, windowMs: WINDOW_MS });
  started.push(bus);
  return { bus, keys: new KeyCache(bus, 100) };
}

function principal(apiKeyId = randomUUID()) {
  return { agentId: randomUUID(), apiKeyId, policy: UNRESTRICTED };
}

/** Two API processes listening on one fresh channel. */
async function twoProcesses() {
  const channel = `test:${randomUUID()}`;
  const a = apiProcess(channel);
  const b = apiProcess(channel);
  await Promise.all([a.bus.start(), b.bus.start()]);
  return { a, b };
}

afterEach(async () => {
  for (const bus of started.splice(0)) await bus.stop();
});

describe("the key cache across processes", () => {
  it("a published revocation has emptied every process's entry by the time the publish returns", async () => {
    const { a, b } = await twoProcesses();
    const who = principal();
    for (const p of [a, b]) p.keys.remember("hash-1", who, p.keys.generation());
    expect(b.keys.get("hash-1")).toEqual(who);
    const other = principal();
    b.keys.remember("hash-2", other, b.keys.generation());

    const published = a.bus.publish("api_keys", [who.apiKeyId]);
    // The writer's own process forgets at once, before anything is sent.
    expect(a.keys.get("hash-1")).toBeUndefined();
    await published;
    expect(b.keys.get("hash-1")).toBeUndefined();
    // Only that key's entries go.
    expect(b.keys.get("hash-2")).toEqual(other);
  });

  it("does not keep a read that a change overtook (the generation moved while it read)", async () => {
    const { a, b } = await twoProcesses();
    const who = principal();
    const before = b.keys.generation();
    // The revocation commits and is told while b's read of the (still active) row is in flight.
    await a.bus.publish("api_keys", [who.apiKeyId]);
    b.keys.remember("hash", who, before);
    expect(b.keys.get("hash")).toBeUndefined();
    // A read begun after the change is kept.
    b.keys.remember("hash", who, b.keys.generation());
    expect(b.keys.get("hash")).toEqual(who);
  });

  it("answers nothing while its subscription is lost, and forgets everything once it is back", async () => {
    const channel = `test:${randomUUID()}`;
    const b = apiProcess(channel);
    await b.bus.start();
    const who = principal();
    b.keys.remember("hash", who, b.keys.generation());
    expect(b.keys.get("hash")).toEqual(who);

    const admin = new Redis(getConfig().redisUrl!);
    try {
      const list = await admin.client("LIST");
      const line = String(list)
        .split("\n")
        .find((l) => l.includes(`name=agentmarket-invalidations-${b.bus.id}`));
      expect(line).toBeDefined();
      const id = /\bid=(\d+)/.exec(line!)![1]!;
      await admin.client("KILL", "ID", id);
    } finally {
      admin.disconnect();
    }
    // A change published now is not heard; the entry must not answer while the connection is away…
    await sleep(20);
    expect(b.bus.isFresh()).toBe(false);
    expect(b.keys.get("hash")).toBeUndefined();
    // …nor once it is back (ioredis reconnects by itself): a change may have gone by unheard.
    const deadline = Date.now() + 5000;
    while (!b.bus.isFresh() && Date.now() < deadline) await sleep(20);
    expect(b.bus.isFresh()).toBe(true);
    expect(b.keys.get("hash")).toBeUndefined();
  });

  it("a change that cannot be told is SERVICE_UNAVAILABLE, not reported effective", async () => {
    const bus = new InvalidationBus({
      redisUrl: "redis://127.0.0.1:1",
      channel: "test:nowhere",
      windowMs: 50,
    });
    const error = await bus.publish("api_keys", [randomUUID()]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("SERVICE_UNAVAILABLE");
  });
});
