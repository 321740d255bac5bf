// Keyed callers quote a listing too (docs/api.md "Quotes"): rail 'ledger' is a binding USDC price for one
// agent, paid from its ledger balance by execute or invoke with quote_id. The invocation remembers the
// quote it pays, so a successful call charges the quoted amount, not the listing's price at that moment.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw("alter table quotes drop constraint quotes_rail_check");
  await knex.raw(
    "alter table quotes add constraint quotes_rail_check check (rail in ('x402','tumbler','ledger'))",
  );
  // A ledger quote belongs to the agent that asked for it.
  await knex.raw(
    "alter table quotes add constraint quotes_ledger_owner_check check (rail <> 'ledger' or agent_id is not null)",
  );
  await knex.schema.alterTable("invocations", (t) => {
    t.uuid("quote_id").references("quotes.id");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropColumn("quote_id");
  });
  await knex.raw("delete from quotes where rail = 'ledger'");
  await knex.raw("alter table quotes drop constraint quotes_ledger_owner_check");
  await knex.raw("alter table quotes drop constraint quotes_rail_check");
  await knex.raw("alter table quotes add constraint quotes_rail_check check (rail in ('x402','tumbler'))");
}
