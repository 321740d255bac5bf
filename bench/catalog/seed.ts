import type { Knex } from "knex";
import knexFactory from "knex";
import type pg from "pg";
import { migrateLatest } from "../../shared/db/migrate.js";
import { fixed, type PostgresServer, withPgClient } from "../lib.js";
import { between, pick, rng, shuffled, zipf } from "./random.js";
import {
  DATABASE,
  INSERT_BATCH,
  KEEP_DATA,
  LISTINGS,
  log,
  POOL_MAX,
  SEED_VERSION,
  SELLERS,
} from "./settings.js";
import { ACTIONS, CATEGORIES, FILLER, MODIFIERS, OBJECTS, SUFFIXES, TAGS, tagOf } from "./vocabulary.js";

// The seeded catalog and the benchmark's own database: generate, insert, reuse when BENCH_KEEP_DATA=1.

// The seeded catalog

export interface SeedRow {
  seller_id: string;
  slug: string;
  name: string;
  description: string;
  category: string;
  endpoint_url: string;
  price_micros: string;
  tags: string;
  status: "active" | "retired";
  retired_at: Date | null;
  verification_status: "verified" | "reachable" | "failed" | null;
  verified_at: Date | null;
  last_success_at: Date | null;
  featured: boolean;
  created_at: Date;
}

export const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

export function* generateListings(count: number, sellers: readonly string[]): Generator<SeedRow> {
  const rand = rng(42);
  const category = zipf(CATEGORIES, 0.6);
  const action = zipf(ACTIONS, 0.9);
  const modifier = zipf(MODIFIERS, 0.8);
  const tag = zipf(shuffled(rng(7), TAGS), 0.7);
  const seller = zipf(sellers, 0.7);
  const slugs = new Map<string, number>();
  const now = Date.now();
  const day = 86_400_000;
  for (let i = 0; i < count; i++) {
    const [cat, objects] = category(rand);
    const object = pick(rand, objects);
    const act = action(rand);
    const shape = rand();
    let words: string[];
    if (shape < 0.35) words = [object, act];
    else if (shape < 0.65) words = [object, modifier(rand), act];
    else if (shape < 0.75) words = [modifier(rand), act];
    else if (shape < 0.95) words = [modifier(rand), object, act];
    else words = [object, act, pick(rand, SUFFIXES)];
    const lower = words.join(" ");
    // Most sellers capitalise their names; alias lookup matches on lower(name).
    const name = rand() < 0.7 ? lower.split(" ").map(capitalize).join(" ") : lower;
    const base = lower.replace(/[^a-z0-9]+/g, "-");
    const seen = (slugs.get(base) ?? 0) + 1;
    slugs.set(base, seen);
    const slug = seen === 1 ? base : `${base}-${seen}`;

    const tags = new Set([tagOf(object)]);
    if (rand() < 0.6) tags.add(cat);
    if (rand() < 0.5) tags.add(act);
    const wanted = between(rand, 2, 5);
    for (let tries = 0; tags.size < wanted && tries < 10; tries++) tags.add(tag(rand));

    const description: string[] = [capitalize(lower)];
    const length = between(rand, 10, 30) - words.length;
    for (let w = 0; w < length; w++) {
      const r = rand();
      description.push(r < 0.75 ? pick(rand, FILLER) : r < 0.9 ? tag(rand) : pick(rand, OBJECTS));
    }

    const createdAt = new Date(now - Math.floor(rand() * 730 * day));
    const retired = rand() < 0.05;
    const v = rand();
    const verification = v < 0.12 ? "verified" : v < 0.2 ? "reachable" : v < 0.22 ? "failed" : null;
    const p = rand();
    const price = p < 0.15 ? 0 : p < 0.9 ? between(rand, 1, 500) * 1000 : between(rand, 500, 5000) * 1000;
    const sellerId = seller(rand);
    yield {
      seller_id: sellerId,
      slug,
      name,
      description: `${description.join(" ")}.`,
      category: cat,
      endpoint_url: `https://${sellerId.slice(0, 8)}.sellers.example/api/${slug}`,
      price_micros: String(price),
      tags: `{${[...tags].join(",")}}`,
      status: retired ? "retired" : "active",
      retired_at: retired ? new Date(createdAt.getTime() + day) : null,
      verification_status: verification,
      verified_at: verification ? new Date(now - Math.floor(rand() * 30 * day)) : null,
      last_success_at: rand() < 0.1 ? new Date(now - Math.floor(rand() * 7 * day)) : null,
      featured: rand() < 0.01,
      created_at: createdAt,
    };
  }
}

export const INSERT_SQL = `
  insert into listings (seller_id, slug, name, description, category, endpoint_url, price_micros, tags,
    status, retired_at, verification_status, verified_at, last_success_at, featured, created_at, updated_at,
    review_status, input_schema, reviewed_at, reviewed_by)
  select seller_id, slug, name, description, category, endpoint_url, price_micros, tags::text[],
    status, retired_at, verification_status, verified_at, last_success_at, featured, created_at, created_at,
    'approved', '{"type":"object","properties":{"input":{"type":"string"}}}'::jsonb, created_at, 'bench'
  from unnest(?::uuid[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[],
    ?::text[], ?::timestamptz[], ?::text[], ?::timestamptz[], ?::timestamptz[], ?::boolean[], ?::timestamptz[])
    as u(seller_id, slug, name, description, category, endpoint_url, price_micros, tags,
      status, retired_at, verification_status, verified_at, last_success_at, featured, created_at)`;

export const COLUMNS = [
  "seller_id",
  "slug",
  "name",
  "description",
  "category",
  "endpoint_url",
  "price_micros",
  "tags",
  "status",
  "retired_at",
  "verification_status",
  "verified_at",
  "last_success_at",
  "featured",
  "created_at",
] as const satisfies readonly (keyof SeedRow)[];

export async function insertBatch(knex: Knex, rows: SeedRow[]): Promise<void> {
  // One array parameter per column: a 5,000-row insert is one short statement, not 75,000 bindings.
  await knex.raw(
    INSERT_SQL,
    COLUMNS.map((column) => rows.map((row) => row[column])) as unknown as Knex.RawBinding[],
  );
}

export async function seed(knex: Knex): Promise<void> {
  const sellers = (
    (await knex.raw(
      `insert into agents (name, intent, signing_public_key)
       select 'bench-seller-' || g, 'seller', 'bench-key-' || g from generate_series(1, ?) g
       returning id`,
      [SELLERS],
    )) as { rows: { id: string }[] }
  ).rows.map((r) => r.id);
  let batch: SeedRow[] = [];
  let done = 0;
  let lastReport = performance.now();
  for (const row of generateListings(LISTINGS, sellers)) {
    batch.push(row);
    if (batch.length < INSERT_BATCH) continue;
    await insertBatch(knex, batch);
    done += batch.length;
    batch = [];
    if (performance.now() - lastReport > 5000) {
      log(`  … ${done.toLocaleString("en")} listings`);
      lastReport = performance.now();
    }
  }
  if (batch.length > 0) await insertBatch(knex, batch);
  await knex("bench_seed").insert({ listings: LISTINGS, seed_version: SEED_VERSION });
}

// The bench database

export function admin<T>(server: PostgresServer, work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withPgClient(server.adminUrl, work);
}

/** True when BENCH_KEEP_DATA=1 and the database already holds this exact seed. */
export async function reusable(server: PostgresServer): Promise<boolean> {
  if (!KEEP_DATA) return false;
  const exists = await admin(server, (c) =>
    c.query("select 1 from pg_database where datname = $1", [DATABASE]),
  );
  if (exists.rowCount === 0) return false;
  return withPgClient(server.url(DATABASE), async (client) => {
    try {
      const found = await client.query("select 1 from bench_seed where listings = $1 and seed_version = $2", [
        LISTINGS,
        SEED_VERSION,
      ]);
      return (found.rowCount ?? 0) > 0;
    } catch {
      return false;
    }
  });
}

export async function recreateDatabase(server: PostgresServer): Promise<void> {
  await admin(server, async (c) => {
    await c.query(`drop database if exists "${DATABASE}" with (force)`);
    await c.query(`create database "${DATABASE}"`);
  });
}

export async function prepare(server: PostgresServer): Promise<Knex> {
  const reuse = await reusable(server);
  if (!reuse) await recreateDatabase(server);
  const knex = knexFactory({
    client: "pg",
    connection: server.url(DATABASE),
    pool: { min: 1, max: POOL_MAX },
    acquireConnectionTimeout: 10_000,
  });
  try {
    await migrateAndSeed(knex, reuse);
  } catch (error) {
    // The caller holds no handle yet: without this the pool would keep the process alive after a failure.
    await knex.destroy();
    throw error;
  }
  return knex;
}

async function migrateAndSeed(knex: Knex, reuse: boolean): Promise<void> {
  const applied = await migrateLatest(knex);
  log(`migrations: ${applied.length} applied`);
  if (reuse) {
    log(`BENCH_KEEP_DATA=1: reusing the ${LISTINGS.toLocaleString("en")} seeded listings in ${DATABASE}`);
  } else {
    await knex.schema.createTable("bench_seed", (t) => {
      t.integer("listings").notNullable();
      t.integer("seed_version").notNullable();
    });
    log(`seeding ${LISTINGS.toLocaleString("en")} listings across ${SELLERS} sellers…`);
    const started = performance.now();
    await seed(knex);
    log(`  seeded in ${fixed((performance.now() - started) / 1000, 1)} s`);
  }
  // Steady state: GIN pending lists flushed, visibility map set, fresh statistics.
  const started = performance.now();
  await knex.raw("vacuum (analyze) listings");
  await knex.raw("vacuum (analyze) listing_search");
  await knex.raw("analyze agents");
  log(`vacuum analyze in ${fixed((performance.now() - started) / 1000, 1)} s`);
}

export async function describeData(knex: Knex): Promise<void> {
  const [counts] = (
    await knex.raw(`
      select count(*) as total,
        count(*) filter (where status = 'active') as active,
        count(*) filter (where status = 'active' and review_status = 'approved'
          and verification_status is distinct from 'failed') as registry,
        count(*) filter (where status = 'active' and review_status = 'approved'
          and verification_status is distinct from 'failed'
          and (verification_status in ('verified', 'reachable') or last_success_at is not null)) as search,
        count(*) filter (where featured) as featured,
        count(distinct seller_id) as sellers,
        count(distinct category) as categories,
        count(distinct lower(name)) as names,
        avg(cardinality(tags))::numeric(4, 2) as tags_per_listing,
        pg_size_pretty(pg_total_relation_size('listings')) as size,
        pg_size_pretty(pg_total_relation_size('listing_search')) as search_size
      from listings`)
  ).rows as Record<string, string>[];
  const [tagCount] = (await knex.raw("select count(distinct t) as n from listings, unnest(tags) t")).rows as {
    n: string;
  }[];
  const indexes = (
    await knex.raw(`
      select indexrelname as name, pg_size_pretty(pg_relation_size(indexrelid)) as size
      from pg_stat_user_indexes where relname in ('listings', 'listing_search') order by pg_relation_size(indexrelid) desc`)
  ).rows as { name: string; size: string }[];
  const c = counts!;
  log("Data");
  log(
    `  listings: ${Number(c.total).toLocaleString("en")} (active ${Number(c.active).toLocaleString("en")}, ` +
      `registry lane ${Number(c.registry).toLocaleString("en")}, search lane ${Number(c.search).toLocaleString("en")}, ` +
      `featured ${c.featured}), ${c.sellers} sellers, ${c.categories} categories, ` +
      `${Number(c.names).toLocaleString("en")} distinct names, ${tagCount?.n} distinct tags ` +
      `(${c.tags_per_listing} per listing)`,
  );
  log(
    `  listings table with indexes: ${c.size}; listing_search (the narrow search rows) with indexes: ${c.search_size}`,
  );
  log(`  indexes: ${indexes.map((i) => `${i.name} ${i.size}`).join(", ")}`);
  log();
}
