// The amount held from the buyer for a paid invocation (docs/payments.md "Paying for calls"): the highest price
// among its candidates, so a fallback never needs a second hold. 0 for free work. The ledger hold itself
// is the transaction with idempotency key ledger:hold:<invocation id>; this column lets views and the
// worker know whether there is one without reading the ledger.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.bigInteger("hold_micros").notNullable().defaultTo(0);
    t.check("hold_micros >= 0", [], "invocations_hold_micros_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropChecks(["invocations_hold_micros_check"]);
    t.dropColumn("hold_micros");
  });
}
