import { getConfig } from "../../config.js";
import type { Db } from "../../db/knex.js";
import { mapsPerHandle } from "../../db/per-handle.js";
import { preparedRaw } from "../../db/prepared.js";
import { setRecent } from "../../kernel/recent.js";
import { catalogPageCache } from "../../observability/metrics.js";
import { CATALOG_GENERATION_SQL } from "./generation.js";
import { LISTING_COLUMNS, type ListingRow } from "./listings.js";

// Catalog pages this process keeps: a page's listing ids, in order, and its total, with the catalog
// generation of the snapshot that computed them (docs/catalog.md "Kept pages"). A page is a function of
// the listings alone (listing_search is their copy, kept by triggers) and of its statement, so while the
// generation has not moved it is still what a fresh read would rank and count. The read of a kept page
// proves that in its own statement and reads the rows themselves afresh: their last_success_at, the
// one column that moves without the generation, is never stale. Nobody has to tell a process anything.
// Every page's rows are read by that statement (readPageRows), a page just computed as well as a kept one.
//
// Kept per database handle (a test may open several databases in one process), least recently used out.

export interface KeptPage {
  /** The catalog generation (decimal text) of the snapshot the page was computed in. */
  generation: string;
  ids: string[];
  total: number;
}

const kept = mapsPerHandle<string, KeptPage>();

/**
 * Keeps a page computed in generation `page.generation` under its statement's key, unless a page of a
 * later generation is kept there already (reads may end out of order), as routing's kept reads do.
 */
export function keepPage(q: Db, key: string, page: KeptPage): void {
  const size = getConfig().catalogPageCacheSize;
  if (size === 0) return;
  const pages = kept.of(q);
  const held = pages.get(key);
  if (held && BigInt(held.generation) > BigInt(page.generation)) return;
  setRecent(pages, key, page, size);
}

// The kept page's rows, in its order, only while the generation is still the page's: when it moved, the
// WHERE is false and no row comes back. An unmoved generation means no listing was deleted, so every id
// is found, and a short answer can only mean the catalog moved. A named statement (prepared.ts): one
// text for every page, planned once per connection, its rows built by their shape.
const KEPT_ROWS_SQL = `select ${LISTING_COLUMNS}
   from unnest(?::uuid[]) with ordinality as page(id, ord) join listings on listings.id = page.id
  where (${CATALOG_GENERATION_SQL}) = ?::bigint
  order by page.ord`;

// An empty page (no match, or past the last) has no rows to prove it by: the generation alone.
const UNMOVED_SQL = `select (${CATALOG_GENERATION_SQL}) = ?::bigint as unmoved`;

/** The page's rows read afresh, or undefined when the catalog moved since it was computed. */
export async function readPageRows(q: Db, page: KeptPage): Promise<ListingRow[] | undefined> {
  if (page.ids.length === 0) {
    const { rows } = await preparedRaw(q, UNMOVED_SQL, [page.generation]);
    return rows[0]?.unmoved === true ? [] : undefined;
  }
  const { rows } = await preparedRaw(q, KEPT_ROWS_SQL, [page.ids, page.generation]);
  return rows.length === page.ids.length ? (rows as ListingRow[]) : undefined;
}

/**
 * The kept page under `key`, its rows read afresh, when the catalog has not moved since it was computed;
 * undefined when none is kept or it has moved (the page is then dropped, and the caller reads afresh).
 */
export async function keptPageRows(
  q: Db,
  key: string,
): Promise<{ rows: ListingRow[]; total: number; generation: string } | undefined> {
  if (getConfig().catalogPageCacheSize === 0) return undefined;
  const pages = kept.peek(q);
  const page = pages?.get(key);
  if (!pages || !page) {
    catalogPageCache.inc({ outcome: "miss" });
    return undefined;
  }
  const rows = await readPageRows(q, page);
  if (!rows) {
    pages.delete(key);
    catalogPageCache.inc({ outcome: "moved" });
    return undefined;
  }
  setRecent(pages, key, page, getConfig().catalogPageCacheSize);
  catalogPageCache.inc({ outcome: "hit" });
  return { rows, total: page.total, generation: page.generation };
}
