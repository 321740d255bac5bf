import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeCommandRedis } from "../../shared/redis.js";
import {
  allowCall,
  type CircuitBreaker,
  type CircuitOptions,
  circuitState,
  createCircuitBreaker,
  recordCallOutcome,
  recordProbeOutcome,
} from "../../shared/routing/circuit-breaker.js";
import { TEST_REDIS_URL } from "../helpers/test-env.js";

// Against real Redis, under a prefix of this run's own, with two independent clients standing in for
// two processes.
const prefix = `{cbtest-${randomBytes(4).toString("hex")}}`;
const COOLDOWN_MS = 300;
let redisA: Redis;
let redisB: Redis;

function breakers(options: Partial<CircuitOptions> = {}): [CircuitBreaker, CircuitBreaker] {
  const opts = { prefix, failureThreshold: 5, cooldownMs: COOLDOWN_MS, ...options };
  return [createCircuitBreaker(redisA, opts), createCircuitBreaker(redisB, opts)];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function fail(breaker: CircuitBreaker, id: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await breaker.recordCallOutcome(id, false);
}

async function stateOf(breaker: CircuitBreaker, id: string) {
  return (await breaker.circuitState([id])).get(id);
}

beforeAll(() => {
  redisA = new Redis(TEST_REDIS_URL);
  redisB = new Redis(TEST_REDIS_URL);
});
afterAll(async () => {
  const keys = await redisA.keys(`${prefix}:*`);
  if (keys.length > 0) await redisA.del(...keys);
  redisA.disconnect();
  redisB.disconnect();
  await closeCommandRedis();
});

describe("circuit breaker: opening", () => {
  it("stays closed below the threshold and opens at CIRCUIT_FAILURE_THRESHOLD consecutive failures", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 4);
    expect(await stateOf(a, id)).toBe("closed");
    expect(await a.allowCall(id)).toBe(true);
    expect(await a.recordCallOutcome(id, false)).toBe("open");
    expect(await stateOf(a, id)).toBe("open");
    expect(await a.allowCall(id)).toBe(false);
  });

  it("counts only consecutive failures: a success in between resets the count", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 4);
    expect(await a.recordCallOutcome(id, true)).toBe("closed");
    await fail(a, id, 4);
    expect(await stateOf(a, id)).toBe("closed");
  });

  it("stays open for the whole cooldown, then turns half-open", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 5);
    await sleep(COOLDOWN_MS / 3);
    expect(await stateOf(a, id)).toBe("open");
    expect(await a.allowCall(id)).toBe(false);
    // A late failure of a call made before the circuit opened does not extend the cooldown.
    expect(await a.recordCallOutcome(id, false)).toBe("open");
    await sleep(COOLDOWN_MS);
    expect(await stateOf(a, id)).toBe("half_open");
  });

  it("reports closed for listings Redis knows nothing about, and keys live under the prefix", async () => {
    const [a] = breakers();
    const known = randomUUID();
    const unknown = randomUUID();
    await fail(a, known, 5);
    const states = await a.circuitState([known, unknown]);
    expect(Object.fromEntries(states)).toEqual({ [known]: "open", [unknown]: "closed" });
    expect(await redisA.exists(`${prefix}:circuit:${known}`)).toBe(1);
    expect(await a.circuitState([])).toEqual(new Map());
  });
});

describe("circuit breaker: half-open", () => {
  async function halfOpen(a: CircuitBreaker): Promise<string> {
    const id = randomUUID();
    await fail(a, id, 5);
    await sleep(COOLDOWN_MS + 20);
    expect(await stateOf(a, id)).toBe("half_open");
    return id;
  }

  it("lets exactly one of 20 concurrent callers (two clients) make the trial call", async () => {
    const [a, b] = breakers();
    const id = await halfOpen(a);
    const verdicts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).allowCall(id)),
    );
    expect(verdicts.filter(Boolean)).toHaveLength(1);
    expect(await b.allowCall(id)).toBe(false);
  });

  it("closes on the trial's success and starts counting from zero", async () => {
    const [a] = breakers();
    const id = await halfOpen(a);
    expect(await a.allowCall(id)).toBe(true);
    expect(await a.recordCallOutcome(id, true)).toBe("closed");
    expect(await a.allowCall(id)).toBe(true);
    await fail(a, id, 4);
    expect(await stateOf(a, id)).toBe("closed");
  });

  it("re-opens for a full cooldown on the trial's failure, then offers a new trial", async () => {
    const [a] = breakers();
    const id = await halfOpen(a);
    expect(await a.allowCall(id)).toBe(true);
    expect(await a.recordCallOutcome(id, false)).toBe("open");
    expect(await a.allowCall(id)).toBe(false);
    await sleep(COOLDOWN_MS + 20);
    expect(await stateOf(a, id)).toBe("half_open");
    expect(await a.allowCall(id)).toBe(true);
  });

  it("frees the trial after its lease when the caller never reports", async () => {
    const [a] = breakers({ trialLeaseMs: 150 });
    const id = await halfOpen(a);
    expect(await a.allowCall(id)).toBe(true);
    expect(await a.allowCall(id)).toBe(false);
    await sleep(200);
    expect(await a.allowCall(id)).toBe(true);
  });
});

describe("circuit breaker: probes and processes", () => {
  it("two independent Redis clients count the same failures and see the same state", async () => {
    const [a, b] = breakers();
    const id = randomUUID();
    await fail(a, id, 3);
    await fail(b, id, 1);
    expect(await stateOf(b, id)).toBe("closed");
    expect(await b.recordCallOutcome(id, false)).toBe("open");
    expect(await stateOf(a, id)).toBe("open");
    expect(await a.allowCall(id)).toBe(false);
    await sleep(COOLDOWN_MS + 20);
    expect(await stateOf(a, id)).toBe("half_open");
    expect(await stateOf(b, id)).toBe("half_open");
  });

  it("a failed probe counts like a failed call", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 4);
    expect(await a.recordProbeOutcome(id, false)).toBe("open");
  });

  it("a successful probe closes a half-open circuit but never cuts a cooldown short", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 5);
    expect(await a.recordProbeOutcome(id, true)).toBe("open");
    expect(await stateOf(a, id)).toBe("open");
    await sleep(COOLDOWN_MS + 20);
    expect(await a.recordProbeOutcome(id, true)).toBe("closed");
    expect(await a.allowCall(id)).toBe(true);
  });

  it("a successful probe leaves failures counted while closed (it proves reachability, not calls)", async () => {
    const [a] = breakers();
    const id = randomUUID();
    await fail(a, id, 4);
    expect(await a.recordProbeOutcome(id, true)).toBe("closed");
    expect(await a.recordCallOutcome(id, false)).toBe("open");
  });

  it("the service functions use QUEUE_PREFIX and CIRCUIT_FAILURE_THRESHOLD (default 5)", async () => {
    const id = randomUUID();
    for (let i = 0; i < 4; i++) await recordCallOutcome(id, false);
    expect(await allowCall(id)).toBe(true);
    expect(await recordProbeOutcome(id, false)).toBe("open");
    expect((await circuitState([id])).get(id)).toBe("open");
    expect(await allowCall(id)).toBe(false);
    expect(await redisA.exists(`${getConfig().queuePrefix}:circuit:${id}`)).toBe(1);
    await redisA.del(`${getConfig().queuePrefix}:circuit:${id}`);
  });
});
