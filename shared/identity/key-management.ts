import type { Static } from "@sinclair/typebox";
import type { Knex } from "knex";
import { recordAudit } from "../audit/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, validationError } from "../errors.js";
import { publishInvalidation } from "../invalidation.js";
import { isUuid } from "../kernel/ids.js";
import { formatUsdc, micros, parseUsdc } from "../kernel/money.js";
import { apiKeyDisplay, generateApiKey, hashApiKey } from "./api-keys.js";
import type { Principal } from "./auth.js";
import { type KeyPolicy, policyFromRow, policyView, widerThan } from "./key-policy.js";
import type { KeyCreateBody } from "./schemas.js";
import { utcDayEnd } from "./spend-limits.js";
import {
  type ApiKeyWithDay,
  findOwnedApiKey,
  insertApiKey,
  listAgentApiKeys,
  revokeApiKeyOnce,
  rotateApiKeySecret,
} from "./store/api-keys.js";

// Managing an agent's API keys (docs/payments.md "Keys, scopes and spend limits"). Creating keys needs a key with
// manage_keys (the registration key has it), and never grants more than that key has. Any key may rotate
// or revoke itself; another key of the agent needs manage_keys and must be no wider than the manager.
// Another agent's key id reads as 404, like an unknown one.

export type KeySpec = Static<typeof KeyCreateBody>;

const NOTICE = "Shown once. Only a hash is stored; a lost key cannot be recovered.";

const amount = (usdc: number | undefined, path: string) =>
  usdc === undefined ? null : parseUsdc(usdc, path);

/** The policy a create request asks for; both seller lists at once → 400. */
function policyFromSpec(spec: KeySpec): KeyPolicy {
  const scopes = spec.scopes ?? {};
  if (scopes.seller_allowlist && scopes.seller_blocklist) {
    throw validationError("a key has a seller allowlist or a blocklist, not both", [
      { path: "/scopes/seller_blocklist", message: "must not be set together with seller_allowlist" },
    ]);
  }
  return {
    categories: scopes.categories ?? null,
    maxPriceMicros: amount(scopes.max_price_usdc, "/scopes/max_price_usdc"),
    sellerAllowlist: scopes.seller_allowlist?.map((s) => s.toLowerCase()) ?? null,
    sellerBlocklist: scopes.seller_blocklist?.map((s) => s.toLowerCase()) ?? null,
    perCallLimitMicros: amount(spec.limits?.per_call_usdc, "/limits/per_call_usdc"),
    dailyCapMicros: amount(spec.limits?.daily_cap_usdc, "/limits/daily_cap_usdc"),
    approvalAboveMicros: amount(spec.approval_above_usdc, "/approval_above_usdc"),
    supervisor: spec.supervisor ?? false,
    manageKeys: spec.manage_keys ?? false,
  };
}

function keyView(row: ApiKeyWithDay, currentKeyId: string) {
  const policy = policyFromRow(row);
  const reserved = micros(row.today_reserved_micros);
  const spent = micros(row.today_spent_micros);
  const left = policy.dailyCapMicros === null ? null : policy.dailyCapMicros - reserved - spent;
  return {
    key_id: row.id,
    name: row.name,
    prefix: row.prefix,
    last_four: row.last_four,
    display: `${row.prefix}…${row.last_four}`,
    status: row.revoked_at ? ("revoked" as const) : ("active" as const),
    current: row.id === currentKeyId,
    ...policyView(policy),
    today: {
      day: row.today,
      reserved_usdc: formatUsdc(reserved),
      spent_usdc: formatUsdc(spent),
      remaining_usdc: left === null ? null : formatUsdc(left > 0n ? left : 0n),
      resets_at: utcDayEnd(row.today),
    },
    created_at: row.created_at.toISOString(),
    created_by_key_id: row.created_by_key_id,
    rotated_at: row.rotated_at?.toISOString() ?? null,
    previous_secret:
      row.previous_expires_at && row.previous_last_four
        ? { last_four: row.previous_last_four, valid_until: row.previous_expires_at.toISOString() }
        : null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}

async function viewOf(principal: Principal, keyId: string) {
  const [row] = await listAgentApiKeys(db(), principal.agentId, keyId);
  return keyView(row!, principal.apiKeyId);
}

function requireManageKeys(principal: Principal, action: string): void {
  if (!principal.policy.manageKeys)
    throw new AppError("POLICY_BLOCKED", `this API key may not ${action}`, {
      required: "manage_keys",
      hint: "use the registration key, or a key created with manage_keys: true",
    });
}

function tooWide(wider: string[], what: string): AppError {
  return new AppError("POLICY_BLOCKED", `${what} would reach further than the key making the request`, {
    wider,
    hint: "a key never grants or manages more than it has itself",
  });
}

/** POST /api/keys: a new key with the requested scopes and limits; the secret is shown once. */
export async function createKey(principal: Principal, spec: KeySpec, requestId: string) {
  requireManageKeys(principal, "create keys");
  const policy = policyFromSpec(spec);
  const wider = widerThan(principal.policy, policy);
  if (wider.length > 0) throw tooWide(wider, "the new key");
  const token = generateApiKey();
  const display = apiKeyDisplay(token);
  const row = await db().transaction(async (trx) => {
    const key = await insertApiKey(trx, {
      agent_id: principal.agentId,
      key_hash: hashApiKey(token),
      prefix: display.prefix,
      last_four: display.lastFour,
      name: spec.name ?? null,
      created_by_key_id: principal.apiKeyId,
      categories: policy.categories ? [...policy.categories] : null,
      max_price_micros: policy.maxPriceMicros,
      seller_allowlist: policy.sellerAllowlist ? [...policy.sellerAllowlist] : null,
      seller_blocklist: policy.sellerBlocklist ? [...policy.sellerBlocklist] : null,
      per_call_limit_micros: policy.perCallLimitMicros,
      daily_cap_micros: policy.dailyCapMicros,
      approval_above_micros: policy.approvalAboveMicros,
      supervisor: policy.supervisor,
      manage_keys: policy.manageKeys,
    });
    await recordAudit(trx, {
      actorAgentId: principal.agentId,
      action: "api_key.created",
      subjectType: "api_key",
      subjectId: key.id,
      requestId,
      data: { by_key_id: principal.apiKeyId, name: key.name, ...policyView(policy) },
    });
    return key;
  });
  return { key: await viewOf(principal, row.id), api_key: token, api_key_notice: NOTICE };
}

/** GET /api/keys: a manage_keys key sees every key of its agent, any other key only itself. */
export async function listKeys(principal: Principal) {
  const all = principal.policy.manageKeys;
  const rows = await listAgentApiKeys(db(), principal.agentId, all ? undefined : principal.apiKeyId);
  return {
    keys: rows.map((r) => keyView(r, principal.apiKeyId)),
    current_key_id: principal.apiKeyId,
    visible: all ? ("agent" as const) : ("this_key" as const),
  };
}

/**
 * The agent's key the caller may manage: itself always; another one only with manage_keys and when it
 * is no wider than the caller. Unknown, malformed and other agents' ids are 404.
 */
async function manageableKey(principal: Principal, keyId: string, action: string) {
  const row = isUuid(keyId) ? await findOwnedApiKey(db(), keyId, principal.agentId) : undefined;
  if (!row) throw new AppError("NOT_FOUND", "no API key with this id for this agent", { key_id: keyId });
  if (row.id === principal.apiKeyId) return row;
  requireManageKeys(principal, `${action} other keys`);
  const wider = widerThan(principal.policy, policyFromRow(row));
  if (wider.length > 0) throw tooWide(wider, "that key");
  return row;
}

/**
 * POST /api/keys/{id}/rotate: a new secret for the same key (same id, scopes, limits and daily spend);
 * the previous secret keeps working for the grace period, then answers 401. A revoked key → 409.
 */
export async function rotateKey(
  principal: Principal,
  keyId: string,
  graceSeconds: number | undefined,
  requestId: string,
) {
  const maxGrace = getConfig().keyRotationGraceSeconds;
  if (graceSeconds !== undefined && graceSeconds > maxGrace) {
    throw validationError("grace period too long", [
      { path: "/grace_seconds", message: `must be at most ${maxGrace} (KEY_ROTATION_GRACE_SECONDS)` },
    ]);
  }
  const grace = graceSeconds ?? maxGrace;
  const target = await manageableKey(principal, keyId, "rotate");
  const token = generateApiKey();
  const rotated = await db().transaction(async (trx) => {
    const row = await rotateApiKeySecret(
      trx,
      target.id,
      { key_hash: hashApiKey(token), last_four: apiKeyDisplay(token).lastFour },
      grace,
    );
    if (!row) return undefined;
    await recordAudit(trx, {
      actorAgentId: principal.agentId,
      action: "api_key.rotated",
      subjectType: "api_key",
      subjectId: row.id,
      requestId,
      data: {
        by_key_id: principal.apiKeyId,
        grace_seconds: grace,
        previous_last_four: row.previous_last_four,
        previous_valid_until: row.previous_expires_at?.toISOString() ?? null,
      },
    });
    return row;
  });
  if (!rotated)
    throw new AppError("CONFLICT", "a revoked key cannot be rotated", {
      key_id: target.id,
      status: "revoked",
    });
  // The old secret's cache entries go (it is now judged by its grace period). The new secret is only
  // in this answer: a failure to tell is logged, not thrown, and entries expire by age (key-cache.ts).
  await publishInvalidation("api_keys", [target.id]).catch(() => {});
  return { key: await viewOf(principal, rotated.id), api_key: token, api_key_notice: NOTICE };
}

/**
 * What a revocation must settle inside its own transaction: purchases still pending approval under the
 * revoked key. They belong to the routing context (holds, invocations), which sits above identity, so the
 * caller passes routing's settler in; it answers the ids of the approvals it denied, for the audit row.
 */
export type SettlePendingOfRevokedKey = (
  trx: Knex.Transaction,
  revoked: { agentId: string; revokedKeyId: string; byKeyId: string; requestId: string },
) => Promise<string[]>;

/**
 * POST /api/keys/{id}/revoke: both secrets stop working on the next request in every process: the answer
 * waits until no process's key cache can still hold the key (shared/invalidation.ts), or is a 503 that
 * asks for a repeat when the other processes could not be told. Approvals still pending under the key
 * are denied in the same transaction (holds released) by `settlePending`. Revoking a revoked key changes
 * nothing and answers the same (and tells the processes again).
 */
export async function revokeKey(
  principal: Principal,
  keyId: string,
  reason: string | null,
  requestId: string,
  settlePending: SettlePendingOfRevokedKey,
) {
  const target = await manageableKey(principal, keyId, "revoke");
  await db().transaction(async (trx) => {
    const row = await revokeApiKeyOnce(trx, target.id);
    if (!row) return;
    const denied = await settlePending(trx, {
      agentId: principal.agentId,
      revokedKeyId: row.id,
      byKeyId: principal.apiKeyId,
      requestId,
    });
    await recordAudit(trx, {
      actorAgentId: principal.agentId,
      action: "api_key.revoked",
      subjectType: "api_key",
      subjectId: row.id,
      requestId,
      data: { by_key_id: principal.apiKeyId, reason, denied_approval_ids: denied },
    });
  });
  // Told even when it was already revoked: a repeat after a 503 here must still reach every process.
  await publishInvalidation("api_keys", [target.id]);
  return { key: await viewOf(principal, target.id) };
}
