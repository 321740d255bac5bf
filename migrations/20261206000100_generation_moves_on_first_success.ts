// The catalog's generation (…29000100) now also moves when a listing's last_success_at goes from null to
// a time: its first successful call is its runtime proof, which puts it in the search lane
// (listing_search.search_lane, …27000110), so a catalog page read before it is no longer what the
// database holds. Kept catalog pages are proved by the generation (shared/catalog/store/page-cache.ts,
// docs/catalog.md "Kept pages"). The execute path's later refreshes of the time still do not move it.
// Routing's kept task listings re-read once per listing's first success: nothing else changes for them.
import type { Knex } from "knex";

const OTHER_COLUMNS_CHANGED =
  "to_jsonb(old) - 'last_success_at' is distinct from to_jsonb(new) - 'last_success_at'";

async function generationTrigger(knex: Knex, when: string): Promise<void> {
  await knex.raw("drop trigger listings_generation_update on listings");
  await knex.raw(`
    create trigger listings_generation_update after update on listings
      for each row when (${when})
      execute function bump_catalog_generation()`);
}

export async function up(knex: Knex): Promise<void> {
  await generationTrigger(
    knex,
    `(${OTHER_COLUMNS_CHANGED}) or (old.last_success_at is null) <> (new.last_success_at is null)`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await generationTrigger(knex, OTHER_COLUMNS_CHANGED);
}
