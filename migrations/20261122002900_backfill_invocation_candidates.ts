// Data: invocations created before candidates existed had exactly one, their listing.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw("update invocations set candidate_ids = array[listing_id] where candidate_ids = '{}'");
  await knex.raw(
    "update invocations set served_listing_id = listing_id where status = 'succeeded' and served_listing_id is null",
  );
}

export async function down(): Promise<void> {
  // Nothing to undo: the columns themselves are dropped by the schema migration's down.
}
