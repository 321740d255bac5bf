// The unit an invocation is paid in (docs/x402.md "Sandbox (tumbler)"): USDC for the router, direct invoke and
// x402; tUSDC, the sandbox's simulated unit, for tumbler invocations and only for them. The hold, capture,
// release, evidence and receipt of an invocation all take their currency from this column, so sandbox
// amounts are never shown or counted as USDC. Existing rows are USDC (the default).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.text("currency").notNullable().defaultTo("USDC");
    t.check("currency in ('USDC','tUSDC')", [], "invocations_currency_check");
    t.check("(route = 'tumbler') = (currency = 'tUSDC')", [], "invocations_route_currency_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropChecks(["invocations_currency_check", "invocations_route_currency_check"]);
    t.dropColumn("currency");
  });
}
