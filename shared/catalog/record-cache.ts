import { getConfig } from "../config.js";
import type { Db } from "../db/knex.js";
import { mapsPerHandle } from "../db/per-handle.js";
import { setRecent } from "../kernel/recent.js";
import { catalogRecordCache } from "../observability/metrics.js";
import type { ListingFacts } from "./listing-facts.js";
import { type BuildOptions, buildListingRecord } from "./listing-record/index.js";

// Listing records this process keeps as their JSON (UTF-8 bytes), for catalog pages (docs/catalog.md "Kept
// records"). Encoding a page's records is most of what an HTTP page costs once its rows are read (a
// record is ~28 KB of JSON, much of it the contracts and export profiles the spec repeats in each one),
// and between two reads of a page most records have not changed.
//
// A record is a pure function of its facts and the build options (listing-record/index.ts: no I/O, no
// clock). So a kept record is proved current by comparing facts, with nothing to tell and nothing to expire:
// - the listing row by the catalog generation it was read at (store/generation.ts): two rows of one
//   listing read at the same generation are alike in every column but last_success_at, compared itself;
// - every other fact (seller, counters, health, reviews, the paid gate, links, days since the last call)
//   and the options, by their JSON, which is exactly what the builder reads of them. A fact added to
//   ListingFacts later is in the stamp without a change here (the rest of the facts go whole).
// A stamp that differs builds the record again and keeps the new bytes. Kept per database handle, like
// kept pages (a test may open several databases whose generations and listing ids can coincide), at most
// CATALOG_RECORD_CACHE_SIZE records, the least recently used out.

interface KeptRecord {
  stamp: string;
  /** The record's JSON, UTF-8: encoded once, sent as bytes (shared/kernel/encoded-json.ts). */
  json: Buffer;
}

const kept = mapsPerHandle<string, KeptRecord>();

// Counted per record, up to a hundred a page: the children are bound once, not looked up by label each time.
const counted = {
  hit: catalogRecordCache.labels("hit"),
  changed: catalogRecordCache.labels("changed"),
  miss: catalogRecordCache.labels("miss"),
};

function encodeRecord(facts: ListingFacts, options: BuildOptions): Buffer {
  return Buffer.from(JSON.stringify(buildListingRecord(facts, options)));
}

/** What a record is a function of, the listing row named by its generation (see above). */
function stampOf(generation: string, facts: ListingFacts, options: BuildOptions): string {
  const { listing, ...rest } = facts;
  return JSON.stringify([generation, listing.last_success_at, options, rest]);
}

/**
 * The record's JSON as UTF-8 (of what JSON.stringify of buildListingRecord(facts, options) gives), kept
 * or built. `generation` is the catalog generation facts.listing was read at; without one (a row read
 * alone) the record is built and encoded afresh and nothing is kept.
 */
export function recordJson(
  q: Db,
  generation: string | null,
  facts: ListingFacts,
  options: BuildOptions,
): Buffer {
  const size = getConfig().catalogRecordCacheSize;
  if (generation === null || size === 0) return encodeRecord(facts, options);
  const records = kept.of(q);
  const stamp = stampOf(generation, facts, options);
  const held = records.get(facts.listing.id);
  if (held?.stamp === stamp) {
    setRecent(records, facts.listing.id, held, size);
    counted.hit.inc();
    return held.json;
  }
  const json = encodeRecord(facts, options);
  setRecent(records, facts.listing.id, { stamp, json }, size);
  (held ? counted.changed : counted.miss).inc();
  return json;
}
