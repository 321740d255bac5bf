import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { refuseUnless } from "../../db/refusals.js";

export interface IdempotencyRow {
  agent_id: string;
  key: string;
  fingerprint: string;
  invocation_id: string;
  created_at: Date;
  expires_at: Date;
}

/** Why claimIdempotencyKey failed (its refuse_unless reason): a live claim holds the key. */
export const KEY_CLAIMED = "routing: the idempotency key is claimed";

/**
 * Claims (agent, key) for an invocation. An expired claim is taken over in the same statement (so the
 * retention holds exactly, whenever the purge runs); a concurrent claimer waits on the unique index until
 * the first transaction ends. A live claim fails the statement (refuse_unless, KEY_CLAIMED) rather than
 * answering it: the transaction's hold goes out behind the claim without waiting for its answer
 * (PostTransactionInput.oneFlight), so a "no" must abort the transaction. The caller reads the claim
 * (findIdempotencyClaim) once its transaction has rolled back.
 */
export async function claimIdempotencyKey(
  q: Db,
  row: Pick<IdempotencyRow, "agent_id" | "key" | "fingerprint" | "invocation_id">,
  retentionHours: number,
): Promise<void> {
  await preparedRaw(
    q,
    `with claimed as (
       insert into idempotency_keys as k (agent_id, key, fingerprint, invocation_id, expires_at)
       values (?, ?, ?, ?, now() + make_interval(hours => ?::int))
       on conflict (agent_id, key) do update
          set fingerprint = excluded.fingerprint, invocation_id = excluded.invocation_id,
              created_at = excluded.created_at, expires_at = excluded.expires_at
        where k.expires_at <= now()
       returning id
     )
     select ${refuseUnless("exists (select 1 from claimed)", KEY_CLAIMED)}`,
    [row.agent_id, row.key, row.fingerprint, row.invocation_id, retentionHours],
  );
}

/** The claim of (agent, key), if there is one. */
export async function findIdempotencyClaim(
  q: Db,
  agentId: string,
  key: string,
): Promise<IdempotencyRow | undefined> {
  return q<IdempotencyRow>("idempotency_keys").where({ agent_id: agentId, key }).first();
}

export async function deleteExpiredIdempotencyKeys(q: Db): Promise<number> {
  return q("idempotency_keys").where("expires_at", "<=", q.fn.now()).delete();
}
