// Task aliases at 100k listings: execute's lookup (findActiveByTaskAlias) matches an alias against a
// listing's slug, tags, category or lowercase name and takes the ten cheapest. A broad alias (a category
// or a common tag) matches 8,000–12,000 active listings, and over listings that is a bitmap scan of four
// indexes, one heap page of the wide table per match and a sort of them all: 20–40 ms at p99 on a slow
// machine (docs/benchmarks.md "The thirty-fourth round"). This table holds one row per active listing
// and alias form it answers to, with what the lookup filters and orders by, so the lookup is a walk of
// one btree in its own order that stops after ten rows. Kept in the writer's transaction by a trigger on
// listings, as listing_search is; docs/catalog.md "Task aliases" explains it.
import type { Knex } from "knex";

// The columns the copy depends on; an update that changes none of them (last_success_at, the execute
// path's once-a-minute refresh, among others) evaluates the WHEN clause and nothing else.
const WATCHED = (row: "old" | "new") =>
  `(${row}.status, ${row}.slug, ${row}.tags, ${row}.category, ${row}.name, ${row}.price_micros,
    ${row}.created_at, ${row}.tool_id, ${row}.tumbler_enabled)`;

// The forms findActiveByTaskAlias compares a lowercased alias with, each as stored (tags and category
// are not lowercased by the lookup, so they are not here), once each.
const ALIASES = (row: string) =>
  `(select distinct a from unnest(array[${row}.slug, ${row}.category, lower(${row}.name)] || ${row}.tags) a
     where a is not null)`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table listing_aliases (
      alias text not null,
      listing_id uuid not null references listings (id) on delete cascade,
      exact boolean not null,
      price_micros bigint not null,
      created_at timestamptz not null,
      tool_id text,
      tumbler_enabled boolean not null,
      primary key (alias, listing_id)
    )`);
  // The lookup's order: the listing whose slug is the alias first, then the cheapest, then the oldest.
  await knex.raw(`
    create index listing_aliases_order_idx
      on listing_aliases (alias, exact desc, price_micros, created_at, listing_id)
      include (tool_id, tumbler_enabled)`);
  await knex.raw("create index listing_aliases_listing_idx on listing_aliases (listing_id)");
  await knex.raw(`
    create function sync_listing_aliases() returns trigger language plpgsql as $$
    begin
      if tg_op = 'UPDATE' then
        delete from listing_aliases where listing_id = new.id;
      end if;
      if new.status = 'active' then
        insert into listing_aliases (alias, listing_id, exact, price_micros, created_at, tool_id, tumbler_enabled)
        select a, new.id, coalesce(a = new.slug, false), new.price_micros, new.created_at, new.tool_id, new.tumbler_enabled
          from ${ALIASES("new")} forms (a);
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger listings_aliases_insert after insert on listings
      for each row execute function sync_listing_aliases()`);
  await knex.raw(`
    create trigger listings_aliases_update after update on listings
      for each row when (${WATCHED("old")} is distinct from ${WATCHED("new")})
      execute function sync_listing_aliases()`);
  // The listings that existed before the trigger: one insert … select.
  await knex.raw(`
    insert into listing_aliases (alias, listing_id, exact, price_micros, created_at, tool_id, tumbler_enabled)
    select forms.a, l.id, coalesce(forms.a = l.slug, false), l.price_micros, l.created_at, l.tool_id, l.tumbler_enabled
      from listings l cross join lateral ${ALIASES("l")} forms (a)
     where l.status = 'active'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop trigger listings_aliases_update on listings");
  await knex.raw("drop trigger listings_aliases_insert on listings");
  await knex.raw("drop function sync_listing_aliases()");
  await knex.raw("drop table listing_aliases");
}
