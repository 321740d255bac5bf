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

const EVIDENCE_COLUMNS = [
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

/** Each column's SQL type: how a VALUES binding is cast, and how a JSON array's field is read. */
const EVIDENCE_TYPES: Record<(typeof EVIDENCE_COLUMNS)[number], string> = {
  agent_id: "uuid",
  invocation_id: "uuid",
  subject_type: "text",
  subject_id: "text",
  state: "evidence_state",
  source: "text",
  source_ref: "text",
  amount_micros: "bigint",
  currency: "text",
  details: "jsonb",
};

/** A new row's fields, one per column: the amount as a string, the details as they are. */
function evidenceFields(e: NewEvidence) {
  return {
    agent_id: e.agent_id,
    invocation_id: e.invocation_id ?? null,
    subject_type: e.subject_type,
    subject_id: e.subject_id,
    state: e.state,
    source: e.source,
    source_ref: e.source_ref,
    amount_micros: e.amount_micros?.toString() ?? null,
    currency: e.currency ?? null,
    details: e.details ?? {},
  };
}

/** A new row's values in EVIDENCE_COLUMNS' order, as bindings (the details as JSON text). */
function evidenceValues(e: NewEvidence): (string | null)[] {
  const fields = evidenceFields(e);
  return EVIDENCE_COLUMNS.map((c) => (c === "details" ? JSON.stringify(fields.details) : fields[c]));
}

/** As an evidence row's source_ref: the ledger transaction that the same statement writes (its id is the database's). */
export const THIS_TRANSACTION = Symbol("the posted ledger transaction");

/** An evidence row written with a ledger post (ledger.ts, PostTransactionInput.evidence). */
export type PostEvidence = Omit<NewEvidence, "source_ref"> & {
  source_ref: NewEvidence["source_ref"] | typeof THIS_TRANSACTION;
};

/** The rows with THIS_TRANSACTION replaced by the transaction's id: what appendEvidence takes. */
export function namingTransaction(rows: PostEvidence[], transactionId: string): NewEvidence[] {
  return rows.map((e) => ({
    ...e,
    source_ref: e.source_ref === THIS_TRANSACTION ? transactionId : e.source_ref,
  }));
}

/** The insert of n rows inside a ledger write, per n: a data-modifying CTE over `tx`. */
const withTransactionTexts = new Map<number, string>();

/** The columns' values as a row of evidence selected from `v`, a THIS_TRANSACTION source_ref as `id`. */
function selectedFrom(id: string): string {
  return EVIDENCE_COLUMNS.map((c) =>
    c === "source_ref" ? `case when v.names_tx then ${id}::text else v.source_ref end` : `v.${c}`,
  ).join(", ");
}

/**
 * The insert of n evidence rows as the body of a CTE in a statement whose `tx` CTE yields the ledger
 * transaction it wrote: the rows are inserted only if `tx` has a row, in their order, a THIS_TRANSACTION
 * source_ref as tx.id. Its bindings: insertWithTransactionValues.
 */
export function insertWithTransaction(n: number): string {
  let sql = withTransactionTexts.get(n);
  if (!sql) {
    // VALUES types its columns by their first row: the casts give each the target column's type.
    const values = `(?::int, ?::boolean, ${EVIDENCE_COLUMNS.map((c) => `?::${EVIDENCE_TYPES[c]}`).join(", ")})`;
    sql = `insert into payment_evidence (${EVIDENCE_COLUMNS.join(", ")})
       select ${selectedFrom("tx.id")}
         from tx cross join (values ${Array(n).fill(values).join(", ")})
              as v (ord, names_tx, ${EVIDENCE_COLUMNS.join(", ")})
        order by v.ord
       on conflict (subject_type, subject_id, state) do nothing`;
    withTransactionTexts.set(n, sql);
  }
  return sql;
}

/** The bindings of insertWithTransaction(rows.length). */
export function insertWithTransactionValues(rows: PostEvidence[]): (string | number | boolean | null)[] {
  return rows.flatMap((e, ord) => {
    const namesTx = e.source_ref === THIS_TRANSACTION;
    return [
      ord,
      namesTx,
      ...evidenceValues({ ...e, source_ref: namesTx ? null : (e.source_ref as string | null) }),
    ];
  });
}

/**
 * The insert of evidence rows as the body of a CTE in a statement that writes several ledger posts
 * (ledger store.ts writeTransactionsInFlight), whose `txp` CTE yields each post's number and transaction:
 * the rows come as one JSON array (evidenceDocument), each naming its post, and each is inserted with
 * that post's transaction, in order. One text whatever the number of rows, so one kept plan.
 */
export function insertWithPostsFromJson(parameter: string): string {
  return `insert into payment_evidence (${EVIDENCE_COLUMNS.join(", ")})
       select ${selectedFrom("txp.id")}
         from txp join jsonb_to_recordset(${parameter}) as v (
                post int, ord int, names_tx boolean, ${EVIDENCE_COLUMNS.map((c) => `${c} ${EVIDENCE_TYPES[c]}`).join(", ")}
              ) on v.post = txp.post
        order by v.post, v.ord
       on conflict (subject_type, subject_id, state) do nothing`;
}

/** The rows of one post, as insertWithPostsFromJson's array takes them (bigints as strings). */
export function evidenceDocument(rows: readonly PostEvidence[], post: number): Record<string, unknown>[] {
  return rows.map((e, ord) => {
    const namesTx = e.source_ref === THIS_TRANSACTION;
    const source_ref = namesTx ? null : (e.source_ref as string | null);
    return { post, ord, names_tx: namesTx, ...evidenceFields({ ...e, source_ref }) };
  });
}

/**
 * Appends one evidence state; recording the same state of a subject again is a no-op (redelivery).
 * A named prepared statement per row count: planning the insert afresh each time cost about as much as
 * running it (docs/benchmarks.md "The nineteenth round"). Evidence of a ledger movement can instead go
 * in with the movement's own write (insertWithTransaction).
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
