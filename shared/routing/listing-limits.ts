import { getConfig } from "../config.js";

/**
 * Per-listing limits shared by every process (Redis): rate_limit calls per minute (a fixed window per
 * wall-clock minute) and concurrency_limit calls in flight (a sorted set of call tokens scored by their
 * deadline, so a crashed worker's slot frees itself at its deadline). max_latency_ms caps each call's
 * time in the provider call itself. Taking a slot is one atomic script, run by the call gate
 * (call-gate.ts) together with the circuit check: several processes cannot overshoot.
 *
 * slot_acquire(rateKey, inflightKey, rateLimit, concurrencyLimit, nowMs, deadlineMs, token, ttlMs)
 * returns 'ok', 'rate_limit' or 'concurrency_limit'.
 */
export const LIMITS_LUA = `
local function slot_acquire(rateKey, inflightKey, rateLimit, concurrencyLimit, now, deadline, token, ttl)
  local count = redis.call('INCR', rateKey)
  if count == 1 then redis.call('EXPIRE', rateKey, 61) end
  if count > tonumber(rateLimit) then
    redis.call('DECR', rateKey)
    return 'rate_limit'
  end
  redis.call('ZREMRANGEBYSCORE', inflightKey, '-inf', now)
  if redis.call('ZCARD', inflightKey) >= tonumber(concurrencyLimit) then
    redis.call('DECR', rateKey)
    return 'concurrency_limit'
  end
  redis.call('ZADD', inflightKey, deadline, token)
  redis.call('PEXPIRE', inflightKey, ttl)
  return 'ok'
end`;

export interface LimitedListing {
  id: string;
  rate_limit: number;
  concurrency_limit: number;
}

export type LimitReason = "rate_limit" | "concurrency_limit";

/** The rate window of this minute and the in-flight set of a listing. */
export function limitKeys(listingId: string, minute: number): { rate: string; inflight: string } {
  const base = `${getConfig().queuePrefix}:limits:${listingId}`;
  return { rate: `${base}:rate:${minute}`, inflight: `${base}:inflight` };
}

/** When a refused call may be tried again: the next minute's window, or a second for concurrency. */
export function limitRetryAfterSeconds(reason: LimitReason, now: number): number {
  const minute = Math.floor(now / 60_000);
  return reason === "rate_limit" ? Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)) : 1;
}
