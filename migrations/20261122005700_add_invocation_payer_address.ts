// An x402 buyer has no account here (docs/x402.md "x402 gateway: how an agent pays"): what identifies the
// buyer of an x402 invocation is the wallet that signed the payment. payer_address keeps it on the
// invocation (lowercase 0x address); keyed routes leave it null.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.text("payer_address");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropColumn("payer_address");
  });
}
