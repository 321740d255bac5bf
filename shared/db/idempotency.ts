import type { Db } from "./knex.js";

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  fingerprint: string;
  invocation_id: string;
  created_at: Date;
  expires_at: Date;
}

/**
 * Claims (agent, key) for an invocation. Returns the existing row instead when the key was claimed
 * before; a concurrent claimer waits on the unique index until the first transaction ends.
 */
export async function claimIdempotencyKey(
  q: Db,
  row: Pick<IdempotencyRow, "agent_id" | "key" | "fingerprint" | "invocation_id">,
  retentionHours: number,
): Promise<{ claimed: true } | { claimed: false; existing: IdempotencyRow }> {
  const inserted = await q("idempotency_keys")
    .insert({ ...row, expires_at: q.raw(`now() + make_interval(hours => ?)`, [retentionHours]) })
    .onConflict(["agent_id", "key"])
    .ignore()
    .returning("id");
  if (inserted.length === 1) return { claimed: true };
  const existing = await q<IdempotencyRow>("idempotency_keys")
    .where({ agent_id: row.agent_id, key: row.key })
    .first();
  return { claimed: false, existing: existing! };
}

/** Live (unexpired) claim for (agent, key), if any. */
export async function findIdempotencyKey(
  q: Db,
  agentId: string,
  key: string,
): Promise<IdempotencyRow | undefined> {
  return q<IdempotencyRow>("idempotency_keys")
    .where({ agent_id: agentId, key })
    .andWhere("expires_at", ">", q.fn.now())
    .first();
}

export async function deleteExpiredIdempotencyKeys(q: Db): Promise<number> {
  return q("idempotency_keys").where("expires_at", "<=", q.fn.now()).delete();
}
