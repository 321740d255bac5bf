// The UTC day whose api_key_spend_days row holds a paid invocation's reservation (issue 6), so the
// capture or release that ends it adjusts that day's row even when it happens after midnight. null =
// nothing reserved (free work, or an invocation from before spend controls).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.date("spend_day");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropColumn("spend_day");
  });
}
