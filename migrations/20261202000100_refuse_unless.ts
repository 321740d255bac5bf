// refuse_unless(ok, reason): true when ok, else it fails the statement that calls it with SQLSTATE AM001
// and `reason` as its message. For a statement that must refuse by failing rather than by its answer:
// one sent in a flight whose COMMIT is already on its way (shared/db/pipeline.ts commitWithThisFlight),
// where an answer that says "no" would arrive after the COMMIT had committed the statements behind it.
// A failure aborts the transaction instead, and the COMMIT rolls it back whole (docs/payments.md
// "Ledger", one flight; shared/db/refusals.ts reads the reason back).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create function refuse_unless(ok boolean, reason text) returns boolean language plpgsql volatile as $$
    begin
      if ok is not true then
        raise exception using errcode = 'AM001', message = reason;
      end if;
      return true;
    end
    $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop function refuse_unless(boolean, text)");
}
