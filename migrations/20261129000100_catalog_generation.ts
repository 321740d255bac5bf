// The catalog's generation: one number that moves, in the writer's own transaction, whenever a listing is
// written, so a process may keep a task's listings in memory and have the execute's claiming insert
// prove they are still what the database holds (shared/catalog/store/generation.ts, docs/architecture.md
// "Caches that are proved"). Triggers keep it, whoever writes listings (the catalog store, health
// probes, stake slashing, seed migrations, tests), as listing_search is kept (…27000110).
//
// - The number is transactional (a row, not a sequence): a reader that sees it moved also sees the
//   change that moved it, and a change not yet committed has not moved it for anyone else.
// - It starts at the microseconds of the migration, not at 0, so a database built again never repeats a
//   generation a long-lived process may still hold.
// - The execute path's once-a-minute refresh of last_success_at (its runtime proof) does not move it:
//   routing reads nothing from that column, and a catalog that moved every minute per served listing
//   would keep every cache cold. Rows are compared as jsonb so a column added later is watched as well.
// - Every listing write waits for the row's lock until its transaction ends. Listing writes are few
//   (sellers, probes, reviews, once a minute per served listing at most) and each is one short statement.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table catalog_generation (
      singleton boolean primary key default true check (singleton),
      generation bigint not null
    )`);
  await knex.raw(
    "insert into catalog_generation (generation) values ((extract(epoch from clock_timestamp()) * 1000000)::bigint)",
  );
  await knex.raw(`
    create function bump_catalog_generation() returns trigger language plpgsql as $$
    begin
      update catalog_generation set generation = generation + 1;
      return null;
    end $$`);
  // Inserts and deletes once per statement (a seed's 5,000-row insert moves it once); updates per row,
  // so the execute path's last_success_at refresh, which updates no row most of the time, costs nothing.
  await knex.raw(`
    create trigger listings_generation_statement after insert or delete or truncate on listings
      for each statement execute function bump_catalog_generation()`);
  await knex.raw(`
    create trigger listings_generation_update after update on listings
      for each row when (to_jsonb(old) - 'last_success_at' is distinct from to_jsonb(new) - 'last_success_at')
      execute function bump_catalog_generation()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop trigger listings_generation_update on listings");
  await knex.raw("drop trigger listings_generation_statement on listings");
  await knex.raw("drop function bump_catalog_generation()");
  await knex.raw("drop table catalog_generation");
}
