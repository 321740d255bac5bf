import { randomUUID } from "node:crypto";
import { getConfig } from "../config.js";
import { commandRedis } from "../redis.js";

/**
 * Per-listing limits shared by every process (Redis): rate_limit calls per minute (a fixed window per
 * wall-clock minute) and concurrency_limit calls in flight (a sorted set of call tokens scored by their
 * deadline, so a crashed worker's slot frees itself at its deadline). max_latency_ms caps each call's
 * time in the provider call itself. Acquire is one atomic script: several processes cannot overshoot.
 */
const ACQUIRE = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], 61) end
if count > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 'rate_limit'
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  redis.call('DECR', KEYS[1])
  return 'concurrency_limit'
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 'ok'`;

export interface LimitedListing {
  id: string;
  rate_limit: number;
  concurrency_limit: number;
}

export type SlotDecision =
  | { ok: true; release(): Promise<void> }
  | { ok: false; reason: "rate_limit" | "concurrency_limit"; retryAfterSeconds: number };

function keys(listingId: string, minute: number): [string, string] {
  const base = `${getConfig().queuePrefix}:limits:${listingId}`;
  return [`${base}:rate:${minute}`, `${base}:inflight`];
}

/** Takes a call slot for the listing for at most holdMs, or says which limit refused it and for how long. */
export async function acquireCallSlot(listing: LimitedListing, holdMs: number): Promise<SlotDecision> {
  const now = Date.now();
  const minute = Math.floor(now / 60_000);
  const [rateKey, inflightKey] = keys(listing.id, minute);
  const token = randomUUID();
  const verdict = (await commandRedis().eval(
    ACQUIRE,
    2,
    rateKey,
    inflightKey,
    listing.rate_limit,
    listing.concurrency_limit,
    now,
    now + holdMs,
    token,
    holdMs + 60_000,
  )) as string;
  if (verdict === "ok") {
    return {
      ok: true,
      release: async () => {
        await commandRedis().zrem(inflightKey, token);
      },
    };
  }
  const retryAfterSeconds =
    verdict === "rate_limit" ? Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)) : 1;
  return { ok: false, reason: verdict as "rate_limit" | "concurrency_limit", retryAfterSeconds };
}
