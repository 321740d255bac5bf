import type { Db } from "../../db/knex.js";
import { preparedRaw, UTC_TODAY_SQL } from "../../db/prepared.js";

export interface ApiKeyRow {
  id: string;
  agent_id: string;
  key_hash: string;
  prefix: string;
  last_four: string;
  created_at: Date;
  revoked_at: Date | null;
  name: string | null;
  created_by_key_id: string | null;
  /** Scopes and limits (null = no restriction); amounts are micro-USDC (int8 → string). */
  categories: string[] | null;
  max_price_micros: string | null;
  seller_allowlist: string[] | null;
  seller_blocklist: string[] | null;
  per_call_limit_micros: string | null;
  daily_cap_micros: string | null;
  approval_above_micros: string | null;
  supervisor: boolean;
  manage_keys: boolean;
  /** Rotation: the previous secret's hash stays valid until previous_expires_at. */
  previous_key_hash: string | null;
  previous_last_four: string | null;
  previous_expires_at: Date | null;
  rotated_at: Date | null;
}

/** The policy columns of a key, as written when it is created. */
export type ApiKeyPolicyColumns = Pick<
  ApiKeyRow,
  "categories" | "seller_allowlist" | "seller_blocklist" | "supervisor" | "manage_keys"
> & {
  max_price_micros: bigint | null;
  per_call_limit_micros: bigint | null;
  daily_cap_micros: bigint | null;
  approval_above_micros: bigint | null;
};

export type NewApiKey = Pick<ApiKeyRow, "agent_id" | "key_hash" | "prefix" | "last_four"> &
  Partial<ApiKeyPolicyColumns> & { name?: string | null; created_by_key_id?: string | null };

const money = (v: bigint | null | undefined) => (v === undefined ? undefined : (v?.toString() ?? null));

export async function insertApiKey(q: Db, key: NewApiKey): Promise<ApiKeyRow> {
  const [row] = await q<ApiKeyRow>("api_keys")
    .insert({
      ...key,
      max_price_micros: money(key.max_price_micros),
      per_call_limit_micros: money(key.per_call_limit_micros),
      daily_cap_micros: money(key.daily_cap_micros),
      approval_above_micros: money(key.approval_above_micros),
    } as never)
    .returning("*");
  return row!;
}

export async function findApiKeyByHash(q: Db, keyHash: string): Promise<ApiKeyRow | undefined> {
  return q<ApiKeyRow>("api_keys").where({ key_hash: keyHash }).first();
}

/** A key found by a secret's hash: the current secret, or the previous one and whether its grace holds. */
export interface KeyForSecret extends ApiKeyRow {
  is_current: boolean;
  previous_live: boolean;
}

/**
 * The key a presented secret belongs to: its current secret or, after a rotation, its previous one.
 * Whether the previous secret is still inside its grace period is judged by the database clock, the
 * same for every process.
 */
export async function findApiKeyBySecretHash(q: Db, keyHash: string): Promise<KeyForSecret | undefined> {
  // Every authenticated request runs this: a named prepared statement (shared/db/prepared.ts).
  const result = await preparedRaw(
    q,
    `select *, (key_hash = ?) as is_current, coalesce(previous_expires_at > now(), false) as previous_live
       from api_keys where key_hash = ? or previous_key_hash = ? limit 1`,
    [keyHash, keyHash, keyHash],
  );
  return result.rows[0] as KeyForSecret | undefined;
}

/** One of the agent's keys; another agent's key reads as absent. */
export async function findOwnedApiKey(q: Db, id: string, agentId: string): Promise<ApiKeyRow | undefined> {
  return q<ApiKeyRow>("api_keys").where({ id, agent_id: agentId }).first();
}

/** A key with the figures of its current UTC day (zeros when it has not spent today). */
export interface ApiKeyWithDay extends ApiKeyRow {
  today: string;
  today_reserved_micros: string;
  today_spent_micros: string;
}

/** The agent's keys (or only one of them), oldest first, each with today's reservation and spend. */
export async function listAgentApiKeys(q: Db, agentId: string, onlyKeyId?: string): Promise<ApiKeyWithDay[]> {
  const result = await q.raw(
    `select k.*, t.day::text as today,
            coalesce(d.reserved_micros, 0)::text as today_reserved_micros,
            coalesce(d.spent_micros, 0)::text as today_spent_micros
       from api_keys k
       cross join (select ${UTC_TODAY_SQL} as day) t
       left join api_key_spend_days d on d.api_key_id = k.id and d.day = t.day
      where k.agent_id = ? ${onlyKeyId ? "and k.id = ?" : ""}
      order by k.created_at, k.id`,
    onlyKeyId ? [agentId, onlyKeyId] : [agentId],
  );
  return result.rows as ApiKeyWithDay[];
}

/**
 * Gives a key a new secret; the current one becomes the previous secret, valid for graceSeconds more
 * (a secret kept from an earlier rotation is dropped at once). Only a key not revoked rotates.
 */
export async function rotateApiKeySecret(
  q: Db,
  id: string,
  secret: { key_hash: string; last_four: string },
  graceSeconds: number,
): Promise<ApiKeyRow | undefined> {
  const [row] = await q<ApiKeyRow>("api_keys")
    .where({ id })
    .whereNull("revoked_at")
    .update({
      previous_key_hash: q.ref("key_hash") as never,
      previous_last_four: q.ref("last_four") as never,
      previous_expires_at: q.raw("now() + make_interval(secs => ?)", [graceSeconds]) as never,
      rotated_at: q.fn.now() as never,
      key_hash: secret.key_hash,
      last_four: secret.last_four,
    })
    .returning("*");
  return row;
}

/** Revokes a key (both secrets) once; undefined when it was already revoked. */
export async function revokeApiKeyOnce(q: Db, id: string): Promise<ApiKeyRow | undefined> {
  const [row] = await q<ApiKeyRow>("api_keys")
    .where({ id })
    .whereNull("revoked_at")
    .update({ revoked_at: q.fn.now() as never })
    .returning("*");
  return row;
}
