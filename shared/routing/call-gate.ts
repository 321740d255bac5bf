import { randomUUID } from "node:crypto";
import { logger } from "../log.js";
import { commandRedis, luaScript } from "../redis.js";
import { CIRCUIT_LUA, type CircuitState, circuitKeys, serviceCircuitOptions } from "./circuit-breaker.js";
import { circuitSeen } from "./circuit-view.js";
import {
  LIMITS_LUA,
  type LimitedListing,
  type LimitReason,
  limitKeys,
  limitRetryAfterSeconds,
} from "./listing-limits.js";

// The call gate: everything Redis decides around one provider call, in two round trips instead of
// five (docs/benchmarks.md "Levers"). Before the call, one script asks the listing's circuit breaker
// and takes a rate and concurrency slot; after it, one script frees the slot and records the outcome on
// the breaker. All four keys share the QUEUE_PREFIX hash tag, so the scripts also run on a Redis Cluster.

// KEYS: circuit, trial, rate window, in-flight set. ARGV: trial lease ms, rate limit, concurrency limit,
// now ms, slot deadline ms, token, in-flight ttl ms.
const OPEN = luaScript(`${CIRCUIT_LUA}
${LIMITS_LUA}
local allowed = circuit_allow(KEYS[1], KEYS[2], redis_now(), ARGV[1], ARGV[6])
if allowed == 0 then return 'circuit_open' end
local verdict = slot_acquire(KEYS[3], KEYS[4], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
-- A half-open trial this caller cannot use goes back, so the next caller may take it.
if verdict ~= 'ok' and allowed == 2 then redis.call('DEL', KEYS[2]) end
return verdict`);

// KEYS: circuit, trial, in-flight set. ARGV: token, outcome ('1' ok, '0' failed, '' not called),
// threshold, cooldown ms, idle ttl ms.
const FINISH = luaScript(`${CIRCUIT_LUA}
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[2] == '' then return 'released' end
return circuit_record(KEYS[1], KEYS[2], redis_now(), ARGV[2], 'call', ARGV[3], ARGV[4], ARGV[5])`);

// An unused slot given back whole: its place in flight, its count in the rate window it was counted in
// (while that window lasts), and the half-open trial when it took it. Once only: a slot no longer in
// flight (given back, finished, or past its deadline) gives nothing back.
// KEYS: trial, rate window, in-flight set. ARGV: token.
const GIVE_BACK = luaScript(`
if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DECR', KEYS[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 'given_back'`);

export type CallGate =
  | {
      ok: true;
      /**
       * Frees the slot and records the call's outcome on the breaker (null: the call was not made, the
       * slot only is freed). Never throws: a slot that cannot be freed frees itself at its deadline.
       */
      finish(outcome: boolean | null): Promise<void>;
      /**
       * Gives an unused slot back whole, as if it had never been asked for (GIVE_BACK): for a slot asked
       * ahead of work that did not go on to the call. Never throws.
       */
      giveBack(): Promise<void>;
    }
  | { ok: false; reason: "circuit_open" | LimitReason; retryAfterSeconds: number };

/**
 * Asks to call a listing now for at most holdMs: refused while its circuit is open (a half-open circuit
 * lets exactly one caller through), or when its rate or concurrency limit is reached.
 */
export async function openCall(listing: LimitedListing, holdMs: number): Promise<CallGate> {
  const circuit = serviceCircuitOptions();
  const [circuitKey, trialKey] = circuitKeys(circuit.prefix, listing.id);
  const now = Date.now();
  const limits = limitKeys(listing.id, Math.floor(now / 60_000));
  const token = randomUUID();
  const verdict = (await OPEN(
    commandRedis(),
    [circuitKey, trialKey, limits.rate, limits.inflight],
    [
      circuit.trialLeaseMs,
      listing.rate_limit,
      listing.concurrency_limit,
      now,
      now + holdMs,
      token,
      holdMs + 60_000,
    ],
  )) as "ok" | "circuit_open" | LimitReason;
  // A verdict past the circuit check says the circuit let the call through (closed, or this trial).
  circuitSeen(listing.id, verdict === "circuit_open" ? "open" : "closed");
  if (verdict === "circuit_open") return { ok: false, reason: verdict, retryAfterSeconds: 1 };
  if (verdict !== "ok")
    return { ok: false, reason: verdict, retryAfterSeconds: limitRetryAfterSeconds(verdict, now) };
  return {
    ok: true,
    giveBack: async () => {
      try {
        await GIVE_BACK(commandRedis(), [trialKey, limits.rate, limits.inflight], [token]);
      } catch (err) {
        logger().warn({ err, listing_id: listing.id }, "unused call slot not given back");
      }
    },
    finish: async (outcome) => {
      try {
        const state = (await FINISH(
          commandRedis(),
          [circuitKey, trialKey, limits.inflight],
          [
            token,
            outcome === null ? "" : outcome ? "1" : "0",
            circuit.failureThreshold,
            circuit.cooldownMs,
            circuit.idleTtlMs,
          ],
        )) as CircuitState | "released";
        if (state !== "released") circuitSeen(listing.id, state);
      } catch (err) {
        logger().warn({ err, listing_id: listing.id }, "call slot not freed or circuit not updated");
      }
    },
  };
}

/**
 * The call gate of a run's first candidate, asked while the insert that claims the run is being written
 * (the two round trips overlap: docs/benchmarks.md "The third round"). The run uses it for attempt 1's
 * call, which still starts only after the attempt is recorded; a run that does not call that listing
 * first gives its slot back when it ends (run-invocation.ts). No gate when the work asks it after its
 * commit (a transaction: submission.ts).
 */
export interface EarlyGate {
  listingId: string;
  gate?: Promise<CallGate>;
}

/**
 * Gives an early gate's slot back whole (giveBack), when one was asked for, granted and not used. Never
 * rejects.
 */
export async function releaseEarlyGate(early: EarlyGate): Promise<void> {
  if (!early.gate) return;
  const gate = await early.gate.catch(() => undefined);
  if (gate?.ok) await gate.giveBack();
}
