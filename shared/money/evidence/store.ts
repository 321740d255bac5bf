import type { Db } from "../../db/knex.js";

/** The evidence states of DESIGN §4 (plus capture and deposit, which the ledger records). */
export const EVIDENCE_STATES = [
  "challenge",
  "authorization",
  "execution",
  "confirmation",
  "settlement",
  "capture",
  "refund",
  "payout",
  "outcome",
  "deposit",
] as const;

export type EvidenceState = (typeof EVIDENCE_STATES)[number];

export interface NewEvidence {
  agent_id: string | null;
  invocation_id?: string | null;
  subject_type: string;
  subject_id: string;
  state: EvidenceState;
  /** What proves it: ledger_hold, ledger_capture, ledger_release, provider_response, tx_hash, … */
  source: string;
  source_ref: string | null;
  amount_micros?: bigint | null;
  currency?: string | null;
  details?: Record<string, unknown>;
}

export interface EvidenceRow {
  id: string;
  created_at: Date;
  agent_id: string | null;
  invocation_id: string | null;
  subject_type: string;
  subject_id: string;
  state: EvidenceState;
  source: string;
  source_ref: string | null;
  amount_micros: string | null;
  currency: string | null;
  details: Record<string, unknown>;
}

/** Appends one evidence state; recording the same state of a subject again is a no-op (redelivery). */
export async function appendEvidence(q: Db, rows: NewEvidence | NewEvidence[]): Promise<void> {
  const list = Array.isArray(rows) ? rows : [rows];
  if (list.length === 0) return;
  await q("payment_evidence")
    .insert(
      list.map((e) => ({
        agent_id: e.agent_id,
        invocation_id: e.invocation_id ?? null,
        subject_type: e.subject_type,
        subject_id: e.subject_id,
        state: e.state,
        source: e.source,
        source_ref: e.source_ref,
        amount_micros: e.amount_micros?.toString() ?? null,
        currency: e.currency ?? null,
        details: JSON.stringify(e.details ?? {}),
      })),
    )
    .onConflict(["subject_type", "subject_id", "state"])
    .ignore();
}

/** Every evidence row of a subject, oldest first. */
export async function listEvidence(q: Db, subjectType: string, subjectId: string): Promise<EvidenceRow[]> {
  return q<EvidenceRow>("payment_evidence")
    .where({ subject_type: subjectType, subject_id: subjectId })
    .orderBy([{ column: "created_at" }, { column: "id" }]);
}
