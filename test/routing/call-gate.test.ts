import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeCommandRedis, commandRedis } from "../../shared/redis.js";
import { openCall } from "../../shared/routing/call-gate.js";
import { allowCall, circuitState, recordCallOutcome } from "../../shared/routing/circuit-breaker.js";

// The call gate runs the breaker and the listing limits in one script each way; these check that the
// composition keeps both rules, under this file's own QUEUE_PREFIX on the test Redis.

const listing = (over: Partial<{ rate_limit: number; concurrency_limit: number }> = {}) => ({
  id: randomUUID(),
  rate_limit: 100,
  concurrency_limit: 10,
  ...over,
});

async function openCircuit(id: string): Promise<void> {
  for (let i = 0; i < getConfig().circuitFailureThreshold; i++) await recordCallOutcome(id, false);
}

afterAll(async () => {
  const keys = await commandRedis().keys(`${getConfig().queuePrefix}:*`);
  if (keys.length > 0) await commandRedis().del(...keys);
  await closeCommandRedis();
});

describe("call gate", () => {
  it("grants a closed circuit a slot, and finish records the outcome on the breaker", async () => {
    const l = listing();
    const gate = await openCall(l, 5000);
    expect(gate.ok).toBe(true);
    if (!gate.ok) return;
    for (let i = 0; i < getConfig().circuitFailureThreshold - 1; i++) {
      const g = await openCall(l, 5000);
      if (g.ok) await g.finish(false);
    }
    expect((await circuitState([l.id])).get(l.id)).toBe("closed");
    await gate.finish(false);
    expect((await circuitState([l.id])).get(l.id)).toBe("open");
  });

  it("refuses while the circuit is open, without taking a slot or counting the rate", async () => {
    const l = listing({ rate_limit: 1 });
    await openCircuit(l.id);
    expect(await openCall(l, 5000)).toMatchObject({ ok: false, reason: "circuit_open" });
    const rateKeys = await commandRedis().keys(`${getConfig().queuePrefix}:limits:${l.id}:*`);
    expect(rateKeys).toEqual([]);
  });

  it("enforces concurrency_limit, and finish frees the slot", async () => {
    const l = listing({ concurrency_limit: 2 });
    const a = await openCall(l, 5000);
    const b = await openCall(l, 5000);
    expect([a.ok, b.ok]).toEqual([true, true]);
    expect(await openCall(l, 5000)).toMatchObject({
      ok: false,
      reason: "concurrency_limit",
      retryAfterSeconds: 1,
    });
    if (a.ok) await a.finish(true);
    const c = await openCall(l, 5000);
    expect(c.ok).toBe(true);
  });

  it("enforces rate_limit per minute with the seconds until the next window", async () => {
    const l = listing({ rate_limit: 2 });
    for (let i = 0; i < 2; i++) {
      const g = await openCall(l, 5000);
      expect(g.ok).toBe(true);
      if (g.ok) await g.finish(true);
    }
    const refused = await openCall(l, 5000);
    expect(refused).toMatchObject({ ok: false, reason: "rate_limit" });
    if (!refused.ok) expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });

  it("gives a half-open trial back when a limit refuses the call, so the next caller may take it", async () => {
    const l = listing({ concurrency_limit: 1 });
    const holder = await openCall(l, 5000);
    expect(holder.ok).toBe(true);
    // Open the circuit, then let its cooldown pass by moving open_until into the past.
    await openCircuit(l.id);
    await commandRedis().hset(`${getConfig().queuePrefix}:circuit:${l.id}`, "open_until", Date.now() - 1);
    expect(await openCall(l, 5000)).toMatchObject({ ok: false, reason: "concurrency_limit" });
    // The trial was returned: the breaker grants it to the next caller.
    expect(await allowCall(l.id)).toBe(true);
  });

  it("giveBack gives an unused slot back whole, its count in the rate window included, once only", async () => {
    const l = listing({ rate_limit: 1, concurrency_limit: 1 });
    const unused = await openCall(l, 5000);
    expect(unused.ok).toBe(true);
    if (!unused.ok) return;
    await unused.giveBack();
    // Once only: a second giveBack would count the window below zero and let two calls through.
    await unused.giveBack();
    // Neither the rate (1 a minute) nor the concurrency (1) counts the slot given back.
    const used = await openCall(l, 5000);
    expect(used.ok).toBe(true);
    if (used.ok) await used.finish(true);
    expect(await openCall(l, 5000)).toMatchObject({ ok: false, reason: "rate_limit" });
  });

  it("giveBack returns a half-open trial the slot took, so the next caller may take it", async () => {
    const l = listing();
    await openCircuit(l.id);
    await commandRedis().hset(`${getConfig().queuePrefix}:circuit:${l.id}`, "open_until", Date.now() - 1);
    const trial = await openCall(l, 5000);
    expect(trial.ok).toBe(true);
    // One trial at a time.
    expect(await openCall(l, 5000)).toMatchObject({ ok: false, reason: "circuit_open" });
    if (trial.ok) await trial.giveBack();
    expect(await allowCall(l.id)).toBe(true);
  });

  it("finish(null) frees the slot without counting an outcome", async () => {
    const l = listing({ concurrency_limit: 1 });
    for (let i = 0; i < getConfig().circuitFailureThreshold + 2; i++) {
      const g = await openCall(l, 5000);
      expect(g.ok).toBe(true);
      if (g.ok) await g.finish(null);
    }
    expect((await circuitState([l.id])).get(l.id)).toBe("closed");
  });
});
