import type { Db } from "../../db/knex.js";

export interface ReceiptRow {
  id: string;
  invocation_id: string;
  /** null for an x402 invocation's receipt (its buyer is a wallet, not an agent). */
  agent_id: string | null;
  listing_id: string;
  amount_micros: string;
  currency: string;
  provider_evidence: Record<string, unknown>;
  created_at: Date;
}

export async function findReceiptForInvocation(q: Db, invocationId: string): Promise<ReceiptRow | undefined> {
  return q<ReceiptRow>("receipts").where({ invocation_id: invocationId }).first();
}

/** Reads a receipt only if it belongs to the agent: another agent's id reads as absent. */
export async function findOwnedReceipt(q: Db, id: string, agentId: string): Promise<ReceiptRow | undefined> {
  return q<ReceiptRow>("receipts").where({ id, agent_id: agentId }).first();
}
