// Schema: listings.tool_id binds a platform-hosted listing to one of the first-party tools (docs/tools.md),
// so catalogs, match and discovery can hide a tool whose provider is not configured, and a direct call of
// it is refused before any hold (fail closed). Null for every other listing; unique where set.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("listings", (t) => {
    t.text("tool_id");
  });
  await knex.raw(
    "create unique index listings_tool_id_unique on listings (tool_id) where tool_id is not null",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index if exists listings_tool_id_unique");
  await knex.schema.alterTable("listings", (t) => {
    t.dropColumn("tool_id");
  });
}
