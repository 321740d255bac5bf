// Catalog search and task-alias lookup at scale (100k+ listings): a weighted full-text vector over
// name, slug, category, tags and descriptions ('simple' config: agents search for identifiers and
// prefixes, not stemmed English), trigram indexes for substring search on names, and
// plain indexes for the alias forms match uses (slug is already unique; tags already have GIN).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw("create extension if not exists pg_trgm");
  // array_to_string is only STABLE; this wrapper is safe to declare IMMUTABLE for text[] and lets the
  // generated column include tags.
  await knex.raw(`
    create or replace function listing_tags_text(tags text[]) returns text
      language sql immutable parallel safe as $$ select coalesce(array_to_string(tags, ' '), '') $$`);
  await knex.raw(`
    alter table listings add column search_vector tsvector generated always as (
      setweight(to_tsvector('simple', coalesce(name, '') || ' ' || coalesce(slug, '')), 'A') ||
      setweight(to_tsvector('simple', coalesce(category, '') || ' ' || listing_tags_text(tags)), 'B') ||
      setweight(to_tsvector('simple', coalesce(description, '') || ' ' || coalesce(long_description, '')), 'C')
    ) stored`);
  await knex.raw("create index listings_search_vector_idx on listings using gin (search_vector)");
  await knex.raw("create index listings_name_trgm_idx on listings using gin (lower(name) gin_trgm_ops)");
  await knex.raw("create index listings_lower_name_idx on listings (lower(name))");
  await knex.raw("create index listings_category_idx on listings (category)");
  await knex.raw(
    "create index listings_active_created_idx on listings (created_at, id) where status = 'active'",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index if exists listings_active_created_idx");
  await knex.raw("drop index if exists listings_category_idx");
  await knex.raw("drop index if exists listings_lower_name_idx");
  await knex.raw("drop index if exists listings_name_trgm_idx");
  await knex.raw("drop index if exists listings_search_vector_idx");
  await knex.raw("alter table listings drop column if exists search_vector");
  await knex.raw("drop function if exists listing_tags_text(text[])");
}
