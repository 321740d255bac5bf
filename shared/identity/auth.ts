import { createHash, timingSafeEqual } from "node:crypto";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { type InvalidationBus, invalidationBus } from "../invalidation.js";
import { hashApiKey, isWellFormedApiKey } from "./api-keys.js";
import { KeyCache } from "./key-cache.js";
import { type KeyPolicy, policyFromRow } from "./key-policy.js";
import { findApiKeyBySecretHash } from "./store/api-keys.js";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export interface Principal {
  agentId: string;
  apiKeyId: string;
  /** The key's scopes, limits and powers, as of this request. */
  policy: KeyPolicy;
}

let cache: { bus: InvalidationBus; keys: KeyCache<Principal> } | undefined;

/** This process's key cache; undefined when caching is off (API_KEY_CACHE_SIZE=0, a Redis Cluster). */
function keyCache(): KeyCache<Principal> | undefined {
  const bus = invalidationBus();
  if (!bus) return undefined;
  if (cache?.bus !== bus) cache = { bus, keys: new KeyCache(bus, getConfig().apiKeyCacheSize) };
  return cache.keys;
}

/**
 * Resolves an Authorization header to the agent behind it, with the key's policy. Missing, malformed,
 * unknown, revoked and expired (rotated, past the grace period) keys are all 401 UNAUTHORIZED; which one
 * it was is said in the message, never whose key it might be. A key's current secret is answered from
 * the process's key cache when it holds it (key-cache.ts): a revocation or rotation answers only once
 * no process can still answer from that entry, so it is effective on the next request in every process.
 * Everything else (a rotated-out secret in its grace period, a miss) reads the key row.
 */
export async function authenticate(header: string | undefined): Promise<Principal> {
  if (!header) throw new AppError("UNAUTHORIZED", "missing Authorization: Bearer <api key>");
  const match = BEARER.exec(header);
  if (!match) throw new AppError("UNAUTHORIZED", "Authorization must be 'Bearer <api key>'");
  const token = match[1]!;
  if (!isWellFormedApiKey(token)) throw new AppError("UNAUTHORIZED", "API key is malformed (expected amk_…)");
  const hash = hashApiKey(token);
  const cache = keyCache();
  const cached = cache?.get(hash);
  if (cached) return cached;
  const generation = cache?.generation();
  const key = await findApiKeyBySecretHash(db(), hash);
  if (!key) throw new AppError("UNAUTHORIZED", "API key is not recognised");
  if (key.revoked_at) throw new AppError("UNAUTHORIZED", "API key has been revoked");
  if (!key.is_current && !key.previous_live)
    throw new AppError("UNAUTHORIZED", "API key was rotated and its grace period has ended");
  const principal = { agentId: key.agent_id, apiKeyId: key.id, policy: policyFromRow(key) };
  if (key.is_current && generation !== undefined) cache!.remember(hash, principal, generation);
  return principal;
}

/**
 * Whether the header carries a well-formed API key (no lookup): work a route may start alongside the
 * lookup (RouteDef.prefetch) is started only then, so a junk request costs no read.
 */
export function bearerIsWellFormed(header: string | undefined): boolean {
  const match = header ? BEARER.exec(header) : null;
  return match !== null && isWellFormedApiKey(match[1]!);
}

/**
 * Checks the operator secret for /api/admin/*. With no ADMIN_API_KEY configured the admin API does not
 * exist (404), so a deployment that never set one exposes nothing. Compared as SHA-256 digests in
 * constant time, so neither the length nor a prefix of the secret leaks through timing.
 */
export function authenticateAdmin(header: string | undefined): void {
  const secret = getConfig().adminApiKey;
  if (!secret) throw new AppError("NOT_FOUND", "no such route");
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  if (!match) throw new AppError("UNAUTHORIZED", "missing Authorization: Bearer <admin key>");
  const digest = (value: string) => createHash("sha256").update(value).digest();
  if (!timingSafeEqual(digest(match[1]!), digest(secret)))
    throw new AppError("UNAUTHORIZED", "admin key is not recognised");
}
