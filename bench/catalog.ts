import os from "node:os";
import knexFactory, { type Knex } from "knex";
import pg from "pg";
import {
  type CatalogQuery,
  findActiveByTaskAlias,
  type Lane,
  searchListings,
} from "../shared/db/listings.js";
import { migrateLatest } from "../shared/db/migrate.js";
import { fixed, type PostgresServer, percentile, resolvePostgresServer, table } from "./lib.js";

/**
 * `npm run bench:catalog`: the two catalog queries at scale, called in-process through the real
 * shared/db/listings.ts functions against a seeded database of its own (no service, no HTTP):
 * searchListings (catalog search, search and registry lanes) and findActiveByTaskAlias (the execute
 * path's task-alias lookup). Prints latencies, throughput, row-count sanity and the plan of the
 * slowest query. A missed target is reported, not failed: this is a measurement, not a test.
 */

const DATABASE = "agentmarket_bench_catalog";
const LISTINGS = Number(process.env.BENCH_LISTINGS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const KEEP_DATA = process.env.BENCH_KEEP_DATA === "1";
const SELLERS = 1000;
const POOL_MAX = 8;
const CONCURRENCY = [1, 8] as const;
const TARGET_P50_MS = 5;
const TARGET_P99_MS = 20;
const TARGET_LISTINGS = 100_000;
/** Bump when the generated data changes, so BENCH_KEEP_DATA does not reuse a stale seed. */
const SEED_VERSION = 1;
const INSERT_BATCH = 5000;

function log(message = ""): void {
  process.stdout.write(`${message}\n`);
}

function loud(message: string): void {
  log(`!!!!! ${message}`);
}

// ---------------------------------------------------------------------------------------------------
// Deterministic randomness

/** mulberry32: small, fast, seeded; the same seed gives the same catalog and the same query lists. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = () => number;

const pick = <T>(rand: Rand, items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
const between = (rand: Rand, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

/** Zipf-like choice: the first items are common, the tail rare, as words and sellers are in a catalog. */
function zipf<T>(items: readonly T[], exponent: number): (rand: Rand) => T {
  const cumulative: number[] = [];
  let sum = 0;
  for (let i = 0; i < items.length; i++) {
    sum += 1 / (i + 1) ** exponent;
    cumulative.push(sum);
  }
  return (rand) => {
    const x = rand() * sum;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return items[lo]!;
  };
}

function shuffled<T>(rand: Rand, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Vocabulary: ~30 categories with their objects, actions and modifiers (~300 words in names), ~500 tags

/** Most common first (the order drives the Zipf weights). */
const CATEGORIES: readonly (readonly [string, readonly string[]])[] = [
  ["documents", ["pdf", "invoice", "receipt", "contract", "resume", "form"]],
  ["web-scraping", ["web page", "html", "sitemap", "website", "product page"]],
  ["nlp", ["text", "sentence", "paragraph", "transcript", "article"]],
  ["data", ["csv", "json", "spreadsheet", "dataset", "sql query"]],
  ["devtools", ["code", "repository", "pull request", "log file", "stack trace"]],
  ["vision", ["image", "photo", "screenshot", "diagram", "logo"]],
  ["ecommerce", ["product", "catalog", "price list", "order", "inventory"]],
  ["sentiment", ["review", "tweet", "comment", "feedback"]],
  ["finance", ["stock price", "crypto", "balance sheet", "expense", "tax return"]],
  ["audio", ["audio", "podcast", "voice memo", "speech"]],
  ["email", ["email", "inbox", "newsletter", "mailing list"]],
  ["translation", ["subtitle", "document", "phrase", "glossary"]],
  ["ocr", ["scanned page", "handwriting", "id card", "license plate"]],
  ["search", ["query", "search result", "keyword", "serp"]],
  ["video", ["video", "youtube video", "clip", "livestream"]],
  ["marketing", ["ad copy", "landing page", "campaign", "slogan"]],
  ["security", ["password", "vulnerability", "malware", "certificate", "domain"]],
  ["social", ["social post", "hashtag", "profile", "mention"]],
  ["customer-support", ["ticket", "chat", "faq", "complaint"]],
  ["research", ["paper", "citation", "abstract", "arxiv"]],
  ["legal", ["legal clause", "policy", "compliance report", "patent"]],
  ["geo", ["address", "map", "location", "route"]],
  ["hr", ["job posting", "candidate", "interview", "payroll"]],
  ["scheduling", ["calendar", "meeting", "event", "reminder"]],
  ["education", ["quiz", "lecture", "flashcard", "essay"]],
  ["health", ["medical record", "lab result", "symptom", "prescription"]],
  ["travel", ["flight", "hotel", "itinerary", "visa"]],
  ["real-estate", ["property listing", "floor plan", "rental", "mortgage"]],
  ["blockchain", ["wallet", "smart contract", "transaction", "token"]],
  ["weather", ["forecast", "weather alert", "climate data", "storm"]],
];

const ACTIONS = [
  "extractor",
  "scraper",
  "classifier",
  "summarizer",
  "parser",
  "translator",
  "generator",
  "converter",
  "analyzer",
  "validator",
  "detector",
  "monitor",
  "api",
  "checker",
  "tracker",
  "cleaner",
  "formatter",
  "enricher",
  "tagger",
  "ranker",
  "recommender",
  "transcriber",
  "captioner",
  "redactor",
  "splitter",
  "merger",
  "compressor",
  "resizer",
  "deduplicator",
  "normalizer",
  "geocoder",
  "scorer",
  "predictor",
  "forecaster",
  "optimizer",
  "auditor",
  "labeler",
  "indexer",
  "crawler",
  "watcher",
  "fetcher",
  "notifier",
  "scheduler",
  "router",
  "matcher",
  "comparer",
  "reviewer",
  "explainer",
  "rewriter",
  "paraphraser",
  "proofreader",
  "writer",
  "planner",
  "finder",
  "lookup",
  "bot",
  "agent",
  "assistant",
  "pipeline",
  "toolkit",
] as const;

const MODIFIERS = [
  "table",
  "entity",
  "keyword",
  "sentiment",
  "language",
  "fast",
  "bulk",
  "multilingual",
  "realtime",
  "structured",
  "smart",
  "simple",
  "advanced",
  "secure",
  "private",
  "open",
  "cheap",
  "accurate",
  "lightweight",
  "local",
  "cloud",
  "gpt",
  "llm",
  "ai",
  "neural",
  "semantic",
  "fuzzy",
  "batch",
  "streaming",
  "incremental",
  "visual",
  "spam",
  "toxicity",
  "fraud",
  "duplicate",
  "pii",
  "metadata",
  "schema",
  "link",
  "price",
  "contact",
  "date",
  "currency",
  "topic",
  "intent",
  "emotion",
  "style",
  "grammar",
  "seo",
  "readability",
  "quality",
  "anomaly",
  "trend",
  "risk",
  "compliance",
  "layout",
  "signature",
  "chart",
  "color",
  "face",
  "object",
  "barcode",
  "qr",
  "ocr",
  "speaker",
  "noise",
  "accent",
  "caption",
  "thumbnail",
  "headline",
  "brand",
  "competitor",
  "lead",
  "churn",
  "pricing",
  "tax",
  "holiday",
  "timezone",
  "unit",
  "markdown",
] as const;

const SUFFIXES = ["pro", "lite", "v2", "plus", "express", "max", "mini", "turbo", "x", "hq"] as const;

const TAG_EXTRAS = [
  "fast",
  "cheap",
  "free",
  "beta",
  "stable",
  "gpu",
  "cpu",
  "batch",
  "async",
  "sync",
  "streaming",
  "webhook",
  "rest",
  "graphql",
  "grpc",
  "json-output",
  "csv-output",
  "xml",
  "yaml",
  "markdown",
  "html-output",
  "ocr",
  "llm",
  "gpt-4",
  "claude",
  "llama",
  "mistral",
  "embeddings",
  "rag",
  "vector",
  "open-source",
  "self-hosted",
  "serverless",
  "edge",
  "low-latency",
  "high-accuracy",
  "enterprise",
  "startup",
  "hobby",
  "research",
  "no-auth",
  "oauth",
  "api-key",
  "rate-limited",
  "unlimited",
  "pay-per-call",
  "subscription",
  "eu-hosted",
  "us-hosted",
  "gdpr",
  "hipaa",
  "soc2",
  "pii-safe",
  "zero-retention",
  "audit-log",
  "deterministic",
  "idempotent",
  "retry-safe",
  "long-running",
  "realtime",
  "cron",
  "scheduled",
  "event-driven",
  "multimodal",
  "vision-model",
  "speech-model",
  "fine-tuned",
  "zero-shot",
  "few-shot",
  "agentic",
  "tool-use",
  "mcp",
  "openapi",
  "sdk",
  "cli",
  "python",
  "typescript",
  "rust",
  "go",
  "java",
  "docker",
  "kubernetes",
  "aws",
  "gcp",
  "azure",
  "cloudflare",
  "vercel",
  "supabase",
  "postgres",
  "sqlite",
  "redis",
  "s3",
  "bigquery",
  "snowflake",
  "shopify",
  "stripe",
  "paypal",
  "quickbooks",
  "xero",
  "salesforce",
  "hubspot",
  "zendesk",
  "intercom",
  "slack",
  "discord",
  "telegram",
  "whatsapp",
  "twitter",
  "linkedin",
  "reddit",
  "github",
  "gitlab",
  "jira",
  "notion",
  "airtable",
  "google-sheets",
  "google-drive",
  "dropbox",
  "gmail",
  "outlook",
  "zapier",
  "make",
  "n8n",
] as const;

const LANGUAGES = [
  "en",
  "de",
  "fr",
  "es",
  "it",
  "pt",
  "nl",
  "sv",
  "no",
  "da",
  "fi",
  "pl",
  "cs",
  "hu",
  "ro",
  "el",
  "tr",
  "ru",
  "uk",
  "ar",
  "he",
  "fa",
  "hi",
  "bn",
  "ur",
  "ta",
  "th",
  "vi",
  "id",
  "ms",
  "zh",
  "ja",
  "ko",
  "sw",
  "am",
  "yo",
] as const;

const FILLER = [
  "returns",
  "structured",
  "json",
  "from",
  "any",
  "input",
  "with",
  "high",
  "accuracy",
  "and",
  "low",
  "latency",
  "for",
  "agents",
  "workflows",
  "pipelines",
  "supports",
  "batch",
  "requests",
  "handles",
  "large",
  "files",
  "quickly",
  "reliably",
  "using",
  "state",
  "of",
  "the",
  "art",
  "models",
  "simple",
  "api",
  "one",
  "call",
  "per",
  "item",
  "output",
  "includes",
  "confidence",
  "scores",
  "metadata",
  "timestamps",
  "clean",
  "normalized",
  "fields",
  "ready",
  "to",
  "use",
  "in",
  "production",
  "no",
  "setup",
  "required",
  "works",
  "on",
  "messy",
  "real",
  "world",
  "data",
  "built",
  "by",
  "a",
  "small",
  "team",
  "tested",
  "against",
  "thousands",
  "samples",
  "deterministic",
  "results",
  "every",
  "time",
  "cheap",
  "fast",
  "secure",
  "private",
  "your",
  "is",
  "never",
  "stored",
  "multilingual",
  "english",
  "only",
  "best",
  "effort",
  "formats",
  "pages",
  "documents",
  "records",
  "rows",
  "images",
  "text",
  "urls",
] as const;

const CATEGORY_NAMES = CATEGORIES.map(([name]) => name);
const OBJECTS = CATEGORIES.flatMap(([, objects]) => objects);
const tagOf = (phrase: string) => phrase.replace(/ /g, "-");
const TAGS = [
  ...new Set([
    ...CATEGORY_NAMES,
    ...OBJECTS.map(tagOf),
    ...ACTIONS,
    ...MODIFIERS,
    ...TAG_EXTRAS,
    ...LANGUAGES.map((l) => `lang-${l}`),
  ]),
];
const NAME_WORDS = new Set([...OBJECTS.flatMap((o) => o.split(" ")), ...ACTIONS, ...MODIFIERS, ...SUFFIXES]);

// ---------------------------------------------------------------------------------------------------
// The seeded catalog

interface SeedRow {
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

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function* generateListings(count: number, sellers: readonly string[]): Generator<SeedRow> {
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

const INSERT_SQL = `
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

const COLUMNS = [
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

async function insertBatch(knex: Knex, rows: SeedRow[]): Promise<void> {
  // One array parameter per column: a 5,000-row insert is one short statement, not 75,000 bindings.
  await knex.raw(
    INSERT_SQL,
    COLUMNS.map((column) => rows.map((row) => row[column])) as unknown as Knex.RawBinding[],
  );
}

async function seed(knex: Knex): Promise<void> {
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

// ---------------------------------------------------------------------------------------------------
// The bench database

async function admin<T>(server: PostgresServer, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server.adminUrl });
  client.on("error", () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** True when BENCH_KEEP_DATA=1 and the database already holds this exact seed. */
async function reusable(server: PostgresServer): Promise<boolean> {
  if (!KEEP_DATA) return false;
  const exists = await admin(server, (c) =>
    c.query("select 1 from pg_database where datname = $1", [DATABASE]),
  );
  if (exists.rowCount === 0) return false;
  const client = new pg.Client({ connectionString: server.url(DATABASE) });
  client.on("error", () => {});
  await client.connect();
  try {
    const found = await client.query("select 1 from bench_seed where listings = $1 and seed_version = $2", [
      LISTINGS,
      SEED_VERSION,
    ]);
    return (found.rowCount ?? 0) > 0;
  } catch {
    return false;
  } finally {
    await client.end();
  }
}

async function recreateDatabase(server: PostgresServer): Promise<void> {
  await admin(server, async (c) => {
    await c.query(`drop database if exists "${DATABASE}" with (force)`);
    await c.query(`create database "${DATABASE}"`);
  });
}

async function prepare(server: PostgresServer): Promise<Knex> {
  const reuse = await reusable(server);
  if (!reuse) await recreateDatabase(server);
  const knex = knexFactory({
    client: "pg",
    connection: server.url(DATABASE),
    pool: { min: 1, max: POOL_MAX },
    acquireConnectionTimeout: 10_000,
  });
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
  await knex.raw("analyze agents");
  log(`vacuum analyze in ${fixed((performance.now() - started) / 1000, 1)} s`);
  return knex;
}

async function describeData(knex: Knex): Promise<void> {
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
        pg_size_pretty(pg_total_relation_size('listings')) as size
      from listings`)
  ).rows as Record<string, string>[];
  const [tagCount] = (await knex.raw("select count(distinct t) as n from listings, unnest(tags) t")).rows as {
    n: string;
  }[];
  const indexes = (
    await knex.raw(`
      select indexrelname as name, pg_size_pretty(pg_relation_size(indexrelid)) as size
      from pg_stat_user_indexes where relname = 'listings' order by pg_relation_size(indexrelid) desc`)
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
  log(`  listings table with indexes: ${c.size}`);
  log(`  indexes: ${indexes.map((i) => `${i.name} ${i.size}`).join(", ")}`);
  log();
}

// ---------------------------------------------------------------------------------------------------
// Query lists

/** Nonsense that matches nothing, so a miss's cost is measured too. */
const MISSES = [
  "xqzv",
  "florbnication",
  "zzyzx quux",
  "plumbus grommet",
  "qwxkj",
  "nonexistentword",
  "vorpal snicker",
  "xylograph",
  "jabberwock",
  "fnord",
] as const;

/** Short terms agents really type: prefix matches on them are large, and trigrams cannot help. */
const SHORT = ["ai", "ml", "ocr", "seo", "pii", "llm", "api", "bot", "qr", "gpt"] as const;

/** The terms whose absence from results would mean the search index or query is broken. */
const COMMON = ["pdf", "extractor", "scraper", "classifier", "documents", "web"] as const;

async function searchQueries(knex: Knex): Promise<string[]> {
  const rand = rng(1001);
  const names = (
    await knex.raw("select lower(name) as name from listings order by md5(slug) limit 65")
  ).rows.map((r: { name: string }) => r.name) as string[];
  const words = [...NAME_WORDS];
  const out: string[] = [];
  // 40 whole words: the commonest of each kind, then a spread over the vocabulary.
  out.push(...ACTIONS.slice(0, 6), ...MODIFIERS.slice(0, 5), ...CATEGORIES.slice(0, 4).map(([, o]) => o[0]!));
  while (out.length < 40) out.push(pick(rand, words));
  // 50 two-word prefixes as typed into a search box ("pdf extr").
  for (const name of names.slice(0, 50)) {
    const [first, second] = name.split(" ");
    out.push(second ? `${first} ${second.slice(0, Math.max(3, Math.ceil(second.length * 0.6)))}` : first!);
  }
  // 15 whole names.
  out.push(...names.slice(50, 65));
  out.push(...CATEGORY_NAMES);
  for (let i = 0; i < 25; i++) out.push(pick(rand, TAGS));
  // 20 single-word prefixes ("summ", "tran").
  for (let i = 0; i < 20; i++) {
    const word = pick(
      rand,
      words.filter((w) => w.length >= 6),
    );
    out.push(word.slice(0, between(rand, 3, 5)));
  }
  out.push(...SHORT, ...MISSES);
  return out;
}

async function aliasQueries(knex: Knex): Promise<string[]> {
  const column = async (sql: string) => (await knex.raw(sql)).rows.map((r: { v: string }) => r.v) as string[];
  const slugs = await column("select slug as v from listings order by md5(slug || 'alias') limit 200");
  const names = await column(
    "select v from (select distinct lower(name) as v from listings) n order by md5(v) limit 150",
  );
  const commonTags = await column(
    "select t as v from listings, unnest(tags) t group by t order by count(*) desc, t limit 50",
  );
  const anyTags = await column(
    "select v from (select distinct t as v from listings, unnest(tags) t) t order by md5(v) limit 50",
  );
  return [
    ...slugs,
    ...names,
    ...commonTags,
    ...anyTags,
    ...CATEGORY_NAMES,
    ...MISSES,
    ...SHORT,
    "echo",
    "no-such-task",
  ];
}

// ---------------------------------------------------------------------------------------------------
// Measurement

interface Scenario {
  name: string;
  queries: readonly string[];
  /** Runs one query; answers how many rows came back and how many matched in all. */
  call(knex: Knex, query: string): Promise<{ rows: number; total: number }>;
}

interface PerQuery {
  calls: number;
  totalMs: number;
  maxMs: number;
  rows: number;
  total: number;
}

interface Result {
  scenario: Scenario;
  concurrency: number;
  calls: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  callsPerSecond: number;
  avgRows: number;
  zeroRowPct: number;
  perQuery: Map<string, PerQuery>;
}

function searchScenario(queries: readonly string[], lane: Lane, limit: number): Scenario {
  return {
    name: `search lane=${lane} limit=${limit}`,
    queries,
    async call(knex, search) {
      const query: CatalogQuery = { search, lane, limit, offset: 0, featuredPerSeller: 3 };
      const { rows, total } = await searchListings(knex, query);
      return { rows: rows.length, total };
    },
  };
}

function aliasScenario(queries: readonly string[]): Scenario {
  return {
    name: "alias findActiveByTaskAlias",
    queries,
    async call(knex, alias) {
      const rows = (await findActiveByTaskAlias(knex, alias)).length;
      return { rows, total: rows };
    },
  };
}

/** Calls the scenario's queries in a fixed shuffled order, `concurrency` at a time, for `seconds`. */
async function run(knex: Knex, scenario: Scenario, concurrency: number, seconds: number): Promise<Result> {
  const order = shuffled(rng(concurrency * 7919), scenario.queries);
  const latencies: number[] = [];
  const perQuery = new Map<string, PerQuery>();
  let next = 0;
  let rowsTotal = 0;
  let zeroRows = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      const query = order[next++ % order.length]!;
      const t0 = performance.now();
      const { rows, total } = await scenario.call(knex, query);
      const ms = performance.now() - t0;
      latencies.push(ms);
      rowsTotal += rows;
      if (rows === 0) zeroRows += 1;
      const stats = perQuery.get(query) ?? { calls: 0, totalMs: 0, maxMs: 0, rows, total };
      stats.calls += 1;
      stats.totalMs += ms;
      stats.maxMs = Math.max(stats.maxMs, ms);
      perQuery.set(query, stats);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    scenario,
    concurrency,
    calls: latencies.length,
    seconds: elapsed,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
    callsPerSecond: latencies.length / elapsed,
    avgRows: rowsTotal / Math.max(1, latencies.length),
    zeroRowPct: (100 * zeroRows) / Math.max(1, latencies.length),
    perQuery,
  };
}

/** Every query once, sequentially: warms the pool, the JIT and PostgreSQL's buffers. */
async function warmUp(knex: Knex, scenario: Scenario): Promise<void> {
  for (const query of scenario.queries) await scenario.call(knex, query);
}

async function preflight(knex: Knex, searchLanes: Scenario[], alias: Scenario): Promise<void> {
  const broken: string[] = [];
  for (const scenario of searchLanes) {
    for (const term of COMMON) {
      if ((await scenario.call(knex, term)).rows === 0) broken.push(`${scenario.name} "${term}"`);
    }
    for (const term of MISSES) {
      const { rows } = await scenario.call(knex, term);
      if (rows > 0) loud(`${scenario.name}: the miss "${term}" returned ${rows} rows`);
    }
  }
  for (const alias_ of ["pdf", "documents", "echo"]) {
    if ((await alias.call(knex, alias_)).rows === 0) broken.push(`${alias.name} "${alias_}"`);
  }
  if (broken.length > 0) {
    throw new Error(
      `no rows for common terms, so the index or the query is broken: ${broken.join(", ")}. ` +
        "The numbers would be meaningless.",
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// Output

function printMachine(server: PostgresServer, version: string): void {
  const cpus = os.cpus();
  log("Machine");
  log(`  cpus: ${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown"}`);
  log(`  memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`);
  log(`  node: ${process.version}`);
  log(`  postgres: ${server.label}/${DATABASE}, ${version}`);
  log(`  knex pool max ${POOL_MAX}; ${SECONDS} s per run; every query once as warm-up`);
  log();
}

function printResults(results: Result[]): void {
  log("Results (in-process calls of the shared/db/listings.ts functions; ms per call)");
  log(
    table(
      [
        "scenario",
        "concurrency",
        "queries",
        "calls",
        "p50 ms",
        "p99 ms",
        "max ms",
        "calls/s",
        "avg rows",
        "0 rows %",
      ],
      results.map((r) => [
        r.scenario.name,
        String(r.concurrency),
        String(r.scenario.queries.length),
        String(r.calls),
        fixed(r.p50Ms),
        fixed(r.p99Ms),
        fixed(r.maxMs),
        fixed(r.callsPerSecond, 0),
        fixed(r.avgRows, 1),
        fixed(r.zeroRowPct, 1),
      ]),
    ),
  );
  log();
}

function slowestQueries(r: Result, n: number): [string, PerQuery][] {
  return [...r.perQuery].sort((a, b) => b[1].totalMs / b[1].calls - a[1].totalMs / a[1].calls).slice(0, n);
}

function printSlowQueries(results: Result[]): void {
  log("Slowest queries at concurrency 1 (mean over their calls)");
  for (const r of results.filter((x) => x.concurrency === 1)) {
    log(`  ${r.scenario.name}:`);
    for (const [query, s] of slowestQueries(r, 5)) {
      log(
        `    ${fixed(s.totalMs / s.calls)} ms mean, ${fixed(s.maxMs)} max, ${s.rows} rows of ${s.total} matches, ` +
          `${s.calls} calls: ${JSON.stringify(query)}`,
      );
    }
  }
  log();
}

function printTargets(results: Result[]): void {
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  log(
    `Targets: p50 ≤ ${TARGET_P50_MS} ms and p99 ≤ ${TARGET_P99_MS} ms for both at ` +
      `${TARGET_LISTINGS.toLocaleString("en")} listings (concurrency 1)`,
  );
  if (LISTINGS !== TARGET_LISTINGS) {
    log(`  (this run has ${LISTINGS.toLocaleString("en")} listings: indicative only)`);
  }
  for (const r of results.filter((x) => x.concurrency === 1)) {
    log(
      `  ${verdict(r.p50Ms <= TARGET_P50_MS)}  ${r.scenario.name}: p50 ${fixed(r.p50Ms)} ms ≤ ${TARGET_P50_MS} ms`,
    );
    log(
      `  ${verdict(r.p99Ms <= TARGET_P99_MS)}  ${r.scenario.name}: p99 ${fixed(r.p99Ms)} ms ≤ ${TARGET_P99_MS} ms`,
    );
  }
  log();
}

/** The SQL and bindings a call issues, captured from knex's query event. */
async function captureSql(knex: Knex, scenario: Scenario, query: string) {
  const seen: { sql: string; bindings: readonly unknown[] }[] = [];
  const listener = (data: { sql: string; bindings?: readonly unknown[] }) =>
    seen.push({ sql: data.sql, bindings: data.bindings ?? [] });
  knex.on("query", listener);
  try {
    await scenario.call(knex, query);
  } finally {
    knex.off("query", listener);
  }
  return seen;
}

async function explain(knex: Knex, server: PostgresServer, scenario: Scenario, query: string, why: string) {
  const statements = await captureSql(knex, scenario, query);
  const client = new pg.Client({ connectionString: server.url(DATABASE) });
  client.on("error", () => {});
  await client.connect();
  try {
    for (const { sql, bindings } of statements) {
      log(`EXPLAIN (ANALYZE, BUFFERS) — ${scenario.name}, ${why}: ${JSON.stringify(query)}`);
      log(`  bindings: ${JSON.stringify(bindings)}`);
      log(`  ${sql.replace(/\s+/g, " ")}`);
      const plan = await client.query(`explain (analyze, buffers) ${sql}`, bindings as unknown[]);
      for (const row of plan.rows as { "QUERY PLAN": string }[]) log(`    ${row["QUERY PLAN"]}`);
      log();
    }
  } finally {
    await client.end();
  }
}

async function printPlans(knex: Knex, server: PostgresServer, results: Result[]): Promise<void> {
  const sequential = results.filter((r) => r.concurrency === 1);
  const slowest = sequential.reduce((a, b) => (b.p99Ms > a.p99Ms ? b : a));
  log(`Plans for the slowest scenario by p99 at concurrency 1: ${slowest.scenario.name}`);
  log();
  const [worst] = slowestQueries(slowest, 1);
  if (worst) await explain(knex, server, slowest.scenario, worst[0], "its slowest query");
  // A typical query too: the one whose mean is closest to the scenario's p50.
  const typical = [...slowest.perQuery].sort(
    (a, b) =>
      Math.abs(a[1].totalMs / a[1].calls - slowest.p50Ms) -
      Math.abs(b[1].totalMs / b[1].calls - slowest.p50Ms),
  )[0];
  if (typical && typical[0] !== worst?.[0]) {
    await explain(knex, server, slowest.scenario, typical[0], "a typical query (mean ≈ p50)");
  }
}

// ---------------------------------------------------------------------------------------------------

let knexInstance: Knex | undefined;

async function main(): Promise<void> {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  if (!Number.isInteger(LISTINGS) || LISTINGS < 1000) throw new Error("BENCH_LISTINGS must be ≥ 1000");
  const server = await resolvePostgresServer(DATABASE);
  if (!server) {
    throw new Error("no PostgreSQL: set BENCH_DATABASE_URL or run one on 127.0.0.1:5432 (user postgres)");
  }
  const version = await admin(
    server,
    async (c) => (await c.query("show server_version")).rows[0].server_version,
  );
  printMachine(server, `PostgreSQL ${version}`);
  const knex = await prepare(server);
  knexInstance = knex;
  await describeData(knex);

  const search = await searchQueries(knex);
  const aliases = await aliasQueries(knex);
  const searchLanes = [
    searchScenario(search, "search", 20),
    searchScenario(search, "search", 100),
    searchScenario(search, "registry", 20),
    searchScenario(search, "registry", 100),
  ];
  const alias = aliasScenario(aliases);
  const scenarios = [...searchLanes, alias];
  log(`queries: ${search.length} search terms, ${aliases.length} task aliases`);
  await preflight(knex, searchLanes, alias);
  for (const scenario of scenarios) await warmUp(knex, scenario);

  const results: Result[] = [];
  for (const concurrency of CONCURRENCY) {
    for (const scenario of scenarios) {
      log(`measuring ${scenario.name} at concurrency ${concurrency} for ${SECONDS} s…`);
      results.push(await run(knex, scenario, concurrency, SECONDS));
    }
  }
  log();
  printResults(results);
  printSlowQueries(results);
  printTargets(results);
  await printPlans(knex, server, results);
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`\n${signal}: stopping`);
    void (knexInstance?.destroy() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

try {
  await main();
} catch (error) {
  loud(`benchmark failed: ${(error as Error).stack ?? error}`);
  process.exitCode = 1;
} finally {
  await knexInstance?.destroy();
}
