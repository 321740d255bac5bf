// Refusals raised in SQL (migrations/20261202000100_refuse_unless.ts): a statement that must say "no" by
// failing, because what follows it in its flight (down to a COMMIT) goes out before its answer, calls
// refuse_unless(ok, reason). The transaction is then aborted, its COMMIT rolls it back whole, and the
// caller reads the reason here to tell which refusal it was (refusalOf, refusedAs). Statements write the
// call with refuseUnless, which keeps the reason a plain string literal.

/** The SQLSTATE refuse_unless fails with (class AM: Agent Market's own, outside PostgreSQL's classes). */
export const REFUSAL_SQLSTATE = "AM001";

/**
 * The reason refuse_unless gave, when `error` is such a refusal; else undefined. As pg reports it, for a
 * statement sent through preparedRaw (knex's own queries prefix the message with their SQL).
 */
export function refusalOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === REFUSAL_SQLSTATE && typeof e.message === "string" ? e.message : undefined;
}

/**
 * The SQL that fails its statement with `reason` unless `condition` holds. The reason goes into the
 * statement's text as a string literal, so one with a quote mark is refused here, when the text is built.
 */
export function refuseUnless(condition: string, reason: string): string {
  if (reason.includes("'")) throw new Error(`a refusal's reason may hold no quote mark: ${reason}`);
  return `refuse_unless(${condition}, '${reason}')`;
}

/**
 * A statement's last select that answers `select`'s rows, or fails with `reason` unless `condition` holds
 * (refuseUnless), instead of answering fewer rows. The one row it always has (`one`) makes sure the
 * condition is evaluated even when `select` has none; `condition` may read them as `s`.
 */
export function answerOrRefuse(select: string, condition: string, reason: string): string {
  return `select s.* from (select 1) as one left join (${select}) as s on true
      where ${refuseUnless(condition, reason)}`;
}

/**
 * A `.catch` handler for a statement that may refuse: the refusal with `reason` is thrown as what `as`
 * makes of it (the caller's own error), any other error as it is.
 */
export function refusedAs(reason: string, as: () => Error): (error: unknown) => never {
  return (error) => {
    throw refusalOf(error) === reason ? as() : error;
  };
}
