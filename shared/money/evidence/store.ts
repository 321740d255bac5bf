import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";

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

/** The columns a new evidence row writes, in the order evidenceValues gives them. */
export const EVIDENCE_COLUMNS = [
  "agent_id",
  "invocation_id",
  "subject_type",
  "subject_id",
  "state",
  "source",
  "source_ref",
  "amount_micros",
  "currency",
  "details",
] as const;

/** The insert's text per row count: a paid call writes one row at its hold and two or three at its end. */
const insertTexts = new Map<number, string>();

function insertText(rows: number): string {
  let sql = insertTexts.get(rows);
  if (!sql) {
    const row = `(${EVIDENCE_COLUMNS.map(() => "?").join(", ")})`;
    sql =
      `insert into payment_evidence (${EVIDENCE_COLUMNS.join(", ")}) values ${Array(rows).fill(row).join(", ")} ` +
      "on conflict (subject_type, subject_id, state) do nothing";
    insertTexts.set(rows, sql);
  }
  return sql;
}

/** A new row's values in EVIDENCE_COLUMNS' order, as bindings. */
export function evidenceValues(e: NewEvidence): (string | null)[] {
  return [
    e.agent_id,
    e.invocation_id ?? null,
    e.subject_type,
    e.subject_id,
    e.state,
    e.source,
    e.source_ref,
    e.amount_micros?.toString() ?? null,
    e.currency ?? null,
    JSON.stringify(e.details ?? {}),
  ];
}

/**
 * Appends one evidence state; recording the same state of a subject again is a no-op (redelivery).
 * A named prepared statement per row count: planning the insert afresh each time cost about as much as
 * running it (docs/benchmarks.md "The nineteenth round"). Evidence of a ledger movement can instead go
 * in with the movement's own write (ledger.ts, PostTransactionInput.evidence).
 */
export async function appendEvidence(q: Db, rows: NewEvidence | NewEvidence[]): Promise<void> {
  const list = Array.isArray(rows) ? rows : [rows];
  if (list.length === 0) return;
  await preparedRaw(q, insertText(list.length), list.flatMap(evidenceValues));
}

/** Every evidence row of a subject, oldest first. */
export async function listEvidence(q: Db, subjectType: string, subjectId: string): Promise<EvidenceRow[]> {
  return q<EvidenceRow>("payment_evidence")
    .where({ subject_type: subjectType, subject_id: subjectId })
    .orderBy([{ column: "created_at" }, { column: "id" }]);
}
