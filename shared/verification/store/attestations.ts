import type { Db } from "../../db/knex.js";
import type { Verdict } from "./orders.js";

export interface AttestationRow {
  id: string;
  order_id: string;
  kid: string;
  jws: string;
  payload: Record<string, unknown>;
  verdict: Verdict;
  observed_at: Date;
  expires_at: Date;
  created_at: Date;
}

export async function insertAttestation(q: Db, row: Omit<AttestationRow, "created_at">): Promise<void> {
  await q("attestations").insert({ ...row, payload: JSON.stringify(row.payload) });
}

export async function findAttestation(q: Db, id: string): Promise<AttestationRow | undefined> {
  return q<AttestationRow>("attestations").where({ id }).first();
}

export async function findAttestationOfOrder(q: Db, orderId: string): Promise<AttestationRow | undefined> {
  return q<AttestationRow>("attestations").where({ order_id: orderId }).first();
}
