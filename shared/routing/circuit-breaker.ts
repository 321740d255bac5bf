import { getConfig } from "../config.js";
import { commandRedis, luaScript, type RedisClient } from "../redis.js";

/**
 * A circuit breaker per listing, kept in Redis so every API and worker process agrees
 * (docs/routing.md "Health probes and the circuit breaker"). CIRCUIT_FAILURE_THRESHOLD consecutive failures open
 * the circuit for CIRCUIT_COOLDOWN_MS; then it is half-open and exactly one caller gets a trial call:
 * success closes it (and resets the count), failure opens it again. Each transition is one Lua script,
 * and the clock is Redis's own TIME, so processes with skewed clocks still agree on when a cooldown ends.
 *
 * Keys: `${prefix}:circuit:<listing_id>` (a hash: failures, open_until in ms) and `…:trial` (the
 * half-open trial, SET NX with a lease). The prefix's hash tag (required on a Redis Cluster) puts both
 * in one slot, as each script needs (the state read of several listings included).
 */
export type CircuitState = "closed" | "open" | "half_open";

export interface CircuitOptions {
  /** Key namespace (QUEUE_PREFIX in the service). */
  prefix: string;
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long an open circuit refuses calls before its half-open trial. */
  cooldownMs: number;
  /** How long a granted trial blocks other trials if its caller never reports (it died). */
  trialLeaseMs?: number;
  /** A failure count with no new failure for this long is forgotten (bounds the keyspace). */
  idleTtlMs?: number;
}

export interface CircuitBreaker {
  recordCallOutcome(listingId: string, ok: boolean): Promise<CircuitState>;
  recordProbeOutcome(listingId: string, ok: boolean): Promise<CircuitState>;
  circuitState(listingIds: readonly string[]): Promise<Map<string, CircuitState>>;
  allowCall(listingId: string): Promise<boolean>;
}

/** Longer than the longest provider call (30 s) plus the worker's margin for recording it. */
export const DEFAULT_TRIAL_LEASE_MS = 35_000;
const DEFAULT_IDLE_TTL_MS = 24 * 3600 * 1000;

/**
 * The breaker's Lua, as functions so the call gate (call-gate.ts) can run a circuit check and a limit
 * slot in one script. The clock is Redis's TIME.
 */
export const CIRCUIT_LUA = `
local function redis_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function circuit_state(key, now)
  local openUntil = tonumber(redis.call('HGET', key, 'open_until') or '0')
  if openUntil == 0 then return 'closed' end
  if now < openUntil then return 'open' end
  return 'half_open'
end
-- 1: closed, call; 2: half-open and this caller holds the trial (SET NX with a lease, its value the
-- caller's token when it has one, so that it alone may give the trial back unused); 0: refused.
local function circuit_allow(key, trialKey, now, leaseMs, owner)
  local state = circuit_state(key, now)
  if state == 'closed' then return 1 end
  if state == 'open' then return 0 end
  if redis.call('SET', trialKey, owner or now, 'NX', 'PX', leaseMs) then return 2 end
  return 0
end
-- ok: '1'|'0'; source: 'call'|'probe'. Returns the state after the outcome.
local function circuit_record(key, trialKey, now, ok, source, threshold, cooldown, idleTtl)
  local state = circuit_state(key, now)
  if ok == '1' then
    -- A probe proves reachability, not that calls work: it ends a cooldown that is over (half-open) but
    -- neither cuts one short nor clears failures counted while closed.
    if source == 'probe' and state ~= 'half_open' then return state end
    redis.call('DEL', key, trialKey)
    return 'closed'
  end
  -- Failures of calls that started before the circuit opened must not extend its cooldown.
  if state == 'open' then return 'open' end
  local failures = redis.call('HINCRBY', key, 'failures', 1)
  if state == 'half_open' or failures >= tonumber(threshold) then
    redis.call('HSET', key, 'open_until', now + tonumber(cooldown))
    redis.call('DEL', trialKey)
    redis.call('PEXPIRE', key, tonumber(cooldown) + tonumber(idleTtl))
    return 'open'
  end
  redis.call('PEXPIRE', key, tonumber(idleTtl))
  return 'closed'
end`;

// ARGV: ok ('1'|'0'), source ('call'|'probe'), threshold, cooldown ms, idle ttl ms.
const RECORD = luaScript(`${CIRCUIT_LUA}
return circuit_record(KEYS[1], KEYS[2], redis_now(), ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])`);

// ARGV: trial lease ms. Returns 1 when the caller may call.
const ALLOW = luaScript(`${CIRCUIT_LUA}
if circuit_allow(KEYS[1], KEYS[2], redis_now(), ARGV[1]) == 0 then return 0 end
return 1`);

// Read-only: each key's state at one TIME.
const STATES = luaScript(`${CIRCUIT_LUA}
local now = redis_now()
local states = {}
for i, key in ipairs(KEYS) do states[i] = circuit_state(key, now) end
return states`);

/** A listing's circuit keys: the hash (failures, open_until) and the half-open trial. */
export function circuitKeys(prefix: string, listingId: string): [string, string] {
  const key = `${prefix}:circuit:${listingId}`;
  return [key, `${key}:trial`];
}

/** A breaker over the given Redis client; the module functions below use the process's command client. */
export function createCircuitBreaker(redis: RedisClient, options: CircuitOptions): CircuitBreaker {
  const key = (listingId: string) => circuitKeys(options.prefix, listingId)[0];
  const trialLeaseMs = options.trialLeaseMs ?? DEFAULT_TRIAL_LEASE_MS;
  const idleTtlMs = options.idleTtlMs ?? DEFAULT_IDLE_TTL_MS;

  const record = async (listingId: string, ok: boolean, source: "call" | "probe") =>
    (await RECORD(
      redis,
      [key(listingId), `${key(listingId)}:trial`],
      [ok ? "1" : "0", source, options.failureThreshold, options.cooldownMs, idleTtlMs],
    )) as CircuitState;

  return {
    recordCallOutcome: (listingId, ok) => record(listingId, ok, "call"),
    recordProbeOutcome: (listingId, ok) => record(listingId, ok, "probe"),
    async circuitState(listingIds) {
      const states = new Map<string, CircuitState>();
      if (listingIds.length === 0) return states;
      // One script, not a pipeline: a pipeline object per read is what ioredis allocates most of, and
      // under load V8 promotes it (docs/benchmarks.md, "Garbage"). TIME keeps Redis's clock the only clock.
      const replies = (await STATES(redis, listingIds.map(key), [])) as CircuitState[];
      for (const [i, id] of listingIds.entries()) states.set(id, replies[i]!);
      return states;
    },
    async allowCall(listingId) {
      const verdict = await ALLOW(redis, [key(listingId), `${key(listingId)}:trial`], [trialLeaseMs]);
      return verdict === 1;
    },
  };
}

/** The service's breaker settings, with every default filled in (the call gate runs the same Lua). */
export function serviceCircuitOptions(): Required<CircuitOptions> {
  const config = getConfig();
  return {
    prefix: config.queuePrefix,
    failureThreshold: config.circuitFailureThreshold,
    cooldownMs: config.circuitCooldownMs,
    trialLeaseMs: DEFAULT_TRIAL_LEASE_MS,
    idleTtlMs: DEFAULT_IDLE_TTL_MS,
  };
}

function serviceBreaker(): CircuitBreaker {
  return createCircuitBreaker(commandRedis(), serviceCircuitOptions());
}

/**
 * Records the outcome of a provider call: a failure counts toward CIRCUIT_FAILURE_THRESHOLD (and
 * re-opens a half-open circuit); a success closes the circuit and resets the count. Returns the state
 * after it. A caller that was granted the half-open trial by allowCall must report its outcome here.
 */
export function recordCallOutcome(listingId: string, ok: boolean): Promise<CircuitState> {
  return serviceBreaker().recordCallOutcome(listingId, ok);
}

/**
 * Records a health probe: a failed probe counts like a failed call; a successful one closes a
 * half-open circuit only (it never cuts a cooldown short). Returns the state after it.
 */
export function recordProbeOutcome(listingId: string, ok: boolean): Promise<CircuitState> {
  return serviceBreaker().recordProbeOutcome(listingId, ok);
}

/**
 * The state of each listing's circuit (closed when Redis knows nothing of it), in one round trip:
 * for ranking candidates. Whether a half-open listing may actually be called is allowCall's answer.
 */
export function circuitState(listingIds: readonly string[]): Promise<Map<string, CircuitState>> {
  return serviceBreaker().circuitState(listingIds);
}

/**
 * Asks to call a listing now: true when closed, false when open, and for a half-open circuit true for
 * exactly one caller per trial (atomic SET NX with a DEFAULT_TRIAL_LEASE_MS lease).
 */
export function allowCall(listingId: string): Promise<boolean> {
  return serviceBreaker().allowCall(listingId);
}
