// Refusals raised in SQL (migrations/20261202000100_refuse_unless.ts): a statement that must say "no" by
// failing, because what follows it in its flight (down to a COMMIT) goes out before its answer, calls
// refuse_unless(ok, reason). The transaction is then aborted, its COMMIT rolls it back whole, and the
// caller reads the reason here to tell which refusal it was. A reason is written into its statement as
// a SQL string literal, so it holds no quote mark.

/** The SQLSTATE refuse_unless fails with (class AM: Agent Market's own, outside PostgreSQL's classes). */
export const REFUSAL_SQLSTATE = "AM001";

/** The reason refuse_unless gave, when `error` is such a refusal; else undefined. */
export function refusalOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === REFUSAL_SQLSTATE && typeof e.message === "string" ? e.message : undefined;
}
