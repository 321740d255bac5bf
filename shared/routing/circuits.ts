import { getConfig } from "../config.js";
import { logger } from "../log.js";
import { commandRedis, scanTargets } from "../redis.js";
import { type CircuitState, circuitState } from "./circuit-breaker.js";
import { circuitSeen, seenOpenCircuits } from "./circuit-view.js";

/**
 * The router's view of the circuit breaker: which of these listings have an open circuit right now.
 * Half-open ones stay eligible; the worker's call gate (call-gate.ts) lets exactly one trial through. If Redis cannot
 * answer, no circuit is reported open (ranking goes on; the worker's own checks still apply).
 */
export async function openCircuits(listingIds: string[]): Promise<Set<string>> {
  if (listingIds.length === 0) return new Set();
  try {
    const states = await circuitState(listingIds);
    const at = Date.now();
    for (const [id, state] of states) circuitSeen(id, state, at);
    return new Set([...states].filter(([, state]) => state === "open").map(([id]) => id));
  } catch (err) {
    logger().warn({ err }, "circuit state unavailable; ranking without it");
    return new Set();
  }
}

/**
 * openCircuits for listings this process keeps (readTaskListings): its own view of their circuits when
 * it is fresh enough, else a read (circuit-view.ts says why a view may rank).
 */
export async function keptOpenCircuits(listingIds: string[]): Promise<Set<string>> {
  return seenOpenCircuits(listingIds) ?? openCircuits(listingIds);
}

/** At most this many circuits are read per count (SCAN pages of the `circuit:` keys). */
const COUNT_LIMIT = 10_000;

/**
 * How many listings' circuits are open, half-open or closed-with-failures right now (for /metrics):
 * a SCAN of the circuit keys Redis holds (they expire when idle, so the set stays bounded), then their
 * states in one round trip. Listings Redis knows nothing of are closed and not counted.
 */
export async function circuitStateCounts(): Promise<Record<CircuitState, number>> {
  const prefix = `${getConfig().queuePrefix}:circuit:`;
  const ids = new Set<string>();
  // On a Redis Cluster the keys sit on the master of the prefix's slot: each master is scanned.
  for (const redis of scanTargets(commandRedis())) {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
      cursor = next;
      for (const key of keys) {
        const rest = key.slice(prefix.length);
        if (!rest.includes(":")) ids.add(rest);
      }
    } while (cursor !== "0" && ids.size < COUNT_LIMIT);
  }
  const counts: Record<CircuitState, number> = { closed: 0, open: 0, half_open: 0 };
  for (const state of (await circuitState([...ids])).values()) counts[state]++;
  return counts;
}
