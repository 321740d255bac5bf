import type { Db } from "../../db/knex.js";

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  fingerprint: string;
  invocation_id: string;
  created_at: Date;
  expires_at: Date;
}

/**
 * Claims (agent, key) for an invocation. An expired claim is taken over in the same statement (so the
 * retention holds exactly, whenever the purge runs); a live one is returned instead. A concurrent
 * claimer waits on the unique index until the first transaction ends.
 */
export async function claimIdempotencyKey(
  q: Db,
  row: Pick<IdempotencyRow, "agent_id" | "key" | "fingerprint" | "invocation_id">,
  retentionHours: number,
): Promise<{ claimed: true } | { claimed: false; existing: IdempotencyRow }> {
  const inserted = await q("idempotency_keys")
    .insert({ ...row, expires_at: q.raw(`now() + make_interval(hours => ?)`, [retentionHours]) })
    .onConflict(["agent_id", "key"])
    .merge(["fingerprint", "invocation_id", "created_at", "expires_at"])
    .where("idempotency_keys.expires_at", "<=", q.fn.now())
    .returning("id");
  if (inserted.length === 1) return { claimed: true };
  const existing = await q<IdempotencyRow>("idempotency_keys")
    .where({ agent_id: row.agent_id, key: row.key })
    .first();
  return { claimed: false, existing: existing! };
}

export async function deleteExpiredIdempotencyKeys(q: Db): Promise<number> {
  return q("idempotency_keys").where("expires_at", "<=", q.fn.now()).delete();
}
