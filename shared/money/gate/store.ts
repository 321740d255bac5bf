import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { refuseUnless } from "../../db/refusals.js";

/** Custody as the operator set it: frozen stops every new paid action (docs/payments.md "The paid-execution gate"). */
export interface CustodyState {
  frozen: boolean;
  reason: string | null;
  updated_at: Date;
  updated_by: string | null;
}

/** The custody row as state; its absence (a database not migrated by us) reads as frozen, never as open. */
function toCustody(
  row:
    | { value: { frozen?: boolean; reason?: string | null }; updated_at: Date; updated_by: string | null }
    | undefined,
): CustodyState {
  if (!row) return { frozen: true, reason: "custody_row_missing", updated_at: new Date(0), updated_by: null };
  return {
    frozen: row.value.frozen === true,
    reason: row.value.reason ?? null,
    updated_at: row.updated_at,
    updated_by: row.updated_by,
  };
}

// A paid call reads the custody row in its transaction, under a share lock, and before that for the gate
// unless its process read it open within CHAIN_CHECK_CACHE_MS (paidGateProvedByHold): both reads are
// named prepared statements, planned once per connection (docs/benchmarks.md "The nineteenth round").
const READ_CUSTODY = "select * from platform_settings where key = 'custody'";

/** The custody switch as stored. */
export async function readCustody(q: Db): Promise<CustodyState> {
  return toCustody((await preparedRaw(q, READ_CUSTODY, [])).rows[0]);
}

/** Why a paid transaction's custody check failed (its refuse_unless reason): custody is frozen. */
export const CUSTODY_FROZEN = "money: custody is frozen";

/**
 * Checks custody inside a paid transaction and holds a share lock on its row until it commits: a freeze
 * (which takes the row FOR UPDATE) waits for in-flight holds, and no hold commits after a freeze. Frozen
 * (or no custody row, read as frozen like toCustody reads it), the statement fails (refuse_unless,
 * CUSTODY_FROZEN) rather than answering so: statements sent behind it without waiting for its answer, a
 * hold and its COMMIT among them, then roll back with it (docs/payments.md "Ledger", one flight).
 */
export async function assertCustodyOpenForShare(trx: Knex.Transaction): Promise<void> {
  await preparedRaw(
    trx,
    `select ${refuseUnless(
      `coalesce((
       select (value -> 'frozen') is distinct from 'true'::jsonb from platform_settings where key = 'custody' for share
     ), false)`,
      CUSTODY_FROZEN,
    )}`,
    [],
  );
}

/** Locks the custody row for a change; the caller writes with writeCustody in the same transaction. */
export async function lockCustody(trx: Knex.Transaction): Promise<CustodyState> {
  return toCustody(await trx("platform_settings").where({ key: "custody" }).forUpdate().first());
}

export async function writeCustody(
  trx: Knex.Transaction,
  value: { frozen: boolean; reason: string | null },
  updatedBy: string,
): Promise<CustodyState> {
  const [row] = await trx("platform_settings")
    .insert({ key: "custody", value: JSON.stringify(value), updated_by: updatedBy, updated_at: trx.fn.now() })
    .onConflict("key")
    .merge()
    .returning("*");
  return toCustody(row);
}
