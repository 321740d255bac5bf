import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { availableToolIds } from "../../tools/index.js";
import { CATALOG_GENERATION_SQL } from "./generation.js";

export type VerificationStatus = "verified" | "reachable" | "failed";

export interface ListingRow {
  id: string;
  seller_id: string | null;
  slug: string;
  name: string;
  description: string;
  long_description: string;
  category: string;
  endpoint_url: string;
  pricing_model: string;
  price_micros: string;
  currency: string;
  input_schema: Record<string, unknown>;
  output_schema: Record<string, unknown> | null;
  tags: string[];
  status: "active" | "retired";
  version: string;
  safe_to_retry: boolean;
  max_latency_ms: number;
  rate_limit: number;
  concurrency_limit: number;
  public_supply_origin: "first_party_service" | "external_seller";
  platform_hosted: boolean;
  /** The first-party tool this listing sells (docs/tools.md), or null. */
  tool_id: string | null;
  listing_type: string;
  delivery_method: string;
  runtime: string;
  data_retention: string;
  allowed_use: string;
  risk_flags: string[];
  required_scopes: string[];
  featured: boolean;
  tumbler_enabled: boolean;
  review_status: string;
  review_score: number | null;
  review_notes: string | null;
  reviewed_at: Date | null;
  reviewed_by: string | null;
  proxy_mode: string;
  proxy_upstream_url: string | null;
  proxy_headers: Record<string, string>;
  proxy_strip_path: boolean;
  verification_status: VerificationStatus | null;
  verified_at: Date | null;
  retired_at: Date | null;
  last_success_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Hides listings of first-party tools whose provider is not configured here (fail closed,
 * docs/tools.md): every listing query that enumerates or matches applies it, to listings or to
 * listing_search (toolColumn "s.tool_id").
 */
export function withoutUnavailableTools<B extends Knex.QueryBuilder>(
  query: B,
  toolColumn = "listings.tool_id",
): B {
  const available = availableToolIds();
  return query.where((w) =>
    available.length > 0 ? w.whereNull(toolColumn).orWhereIn(toolColumn, available) : w.whereNull(toolColumn),
  ) as B;
}

/** The form a task is matched in: "Echo " and "echo" name the same listings. */
export function taskAlias(task: string): string {
  return task.trim().toLowerCase();
}

/**
 * Active listings answering to a task alias: slug, tag, category or lowercase name (spec "Routing
 * rules"), read from listing_aliases, one row per active listing and form. Exact slug first, then
 * cheapest, then oldest, then by id: deterministic. tumblerOnly keeps the listings whose sellers opted
 * in to the sandbox (tumbler_enabled).
 */
export async function findActiveByTaskAlias(
  q: Db,
  task: string,
  options: { tumblerOnly?: boolean } = {},
): Promise<ListingRow[]> {
  return (await preparedRaw(q, TASK_ALIAS_SQL.plain, taskAliasBindings(task, options))).rows as ListingRow[];
}

/** A task's listings and the catalog generation of the snapshot they were read in (generation.ts). */
export interface TaskListings {
  rows: ListingRow[];
  /** Null when no listing answers (the generation rides on the rows). */
  generation: string | null;
}

/** findActiveByTaskAlias, with the catalog generation read in the same statement (the same snapshot). */
export async function findActiveByTaskAliasAt(q: Db, task: string): Promise<TaskListings> {
  const result = await preparedRaw(q, TASK_ALIAS_SQL.withGeneration, taskAliasBindings(task, {}));
  const rows = result.rows as (ListingRow & { catalog_generation?: string })[];
  const generation = rows[0]?.catalog_generation ?? null;
  // Kept off the rows, which other code may show whole: a new object per row, in one shape.
  return { rows: rows.map(({ catalog_generation: _, ...row }) => row as ListingRow), generation };
}

// Every execute reads this: one fixed text per form, a named prepared statement (shared/db/prepared.ts).
// The tool filter is withoutUnavailableTools' as an array parameter. A broad alias (a category or a
// common tag: 8,000–12,000 listings at 100k) is a walk of listing_aliases_order_idx in the answer's
// order that stops after ten rows (migrations/20261205000100); only the ten are read in full.
function taskAliasSql(withGeneration: boolean): string {
  const generation = withGeneration ? `, (${CATALOG_GENERATION_SQL})::text as catalog_generation` : "";
  return `with top as (
       select listing_id as id, exact, price_micros, created_at from listing_aliases
        where alias = ? and (not ?::boolean or tumbler_enabled)
          and (tool_id is null or tool_id = any(?::text[]))
        order by exact desc, price_micros asc, created_at asc, listing_id
        limit 10
     )
     select ${LISTING_COLUMNS}${generation} from top join listings on listings.id = top.id
      order by top.exact desc, top.price_micros asc, top.created_at asc, top.id`;
}

function taskAliasBindings(task: string, options: { tumblerOnly?: boolean }): Knex.RawBinding[] {
  return [taskAlias(task), options.tumblerOnly === true, availableToolIds()];
}

export async function findListing(q: Db, id: string): Promise<ListingRow | undefined> {
  return (await q("listings").select(listingColumns(q)).where({ id }).first()) as ListingRow | undefined;
}

/** A listing only if this seller owns it: anyone else's reads as absent. */
export async function findOwnedListing(q: Db, id: string, sellerId: string): Promise<ListingRow | undefined> {
  return (await q("listings").select(listingColumns(q)).where({ id, seller_id: sellerId }).first()) as
    | ListingRow
    | undefined;
}

export async function countLiveListings(q: Db, sellerId: string): Promise<number> {
  const [row] = await q("listings").where({ seller_id: sellerId, status: "active" }).count({ n: "*" });
  return Number(row?.n ?? 0);
}

export type NewListing = Pick<
  ListingRow,
  | "seller_id"
  | "slug"
  | "name"
  | "description"
  | "long_description"
  | "category"
  | "endpoint_url"
  | "pricing_model"
  | "input_schema"
  | "output_schema"
  | "tags"
  | "safe_to_retry"
  | "data_retention"
  | "allowed_use"
  | "reviewed_by"
  | "review_notes"
> & { price_micros: bigint; tumbler_enabled?: boolean };

export async function insertListing(q: Db, row: NewListing): Promise<ListingRow> {
  const [inserted] = (await q("listings")
    .insert({
      ...row,
      price_micros: row.price_micros.toString(),
      input_schema: JSON.stringify(row.input_schema) as never,
      output_schema: row.output_schema === null ? null : (JSON.stringify(row.output_schema) as never),
      reviewed_at: q.fn.now(),
    })
    .returning(listingColumns(q) as never)) as ListingRow[];
  return inserted!;
}

export type ListingChanges = Partial<
  Pick<
    ListingRow,
    | "name"
    | "description"
    | "long_description"
    | "category"
    | "endpoint_url"
    | "input_schema"
    | "output_schema"
    | "tags"
    | "safe_to_retry"
    | "data_retention"
    | "allowed_use"
    | "version"
    | "tumbler_enabled"
  > & { price_micros: bigint }
>;

/** Applies changes to a live listing and records them (with old and new price) in one transaction. */
export async function updateListing(
  trx: Knex.Transaction,
  current: ListingRow,
  changes: ListingChanges,
  changedBy: string,
): Promise<ListingRow> {
  const values: Record<string, unknown> = { ...changes, updated_at: trx.fn.now() };
  if (changes.price_micros !== undefined) values.price_micros = changes.price_micros.toString();
  if (changes.input_schema !== undefined) values.input_schema = JSON.stringify(changes.input_schema);
  if (changes.output_schema !== undefined) {
    values.output_schema = changes.output_schema === null ? null : JSON.stringify(changes.output_schema);
  }
  const [updated] = (await trx("listings")
    .where({ id: current.id })
    .update(values)
    .returning(listingColumns(trx) as never)) as ListingRow[];
  await trx("listing_changes").insert({
    listing_id: current.id,
    changed_by: changedBy,
    from_version: current.version,
    to_version: updated!.version,
    from_price_micros: current.price_micros,
    to_price_micros: updated!.price_micros,
    fields: Object.keys(changes).filter((k) => k !== "version"),
  });
  return updated!;
}

export interface ListingChangeRow {
  from_version: string;
  to_version: string;
  from_price_micros: string;
  to_price_micros: string;
  fields: string[];
  changed_at: Date;
}

export async function listListingChanges(q: Db, listingId: string): Promise<ListingChangeRow[]> {
  return (await q("listing_changes")
    .select("from_version", "to_version", "from_price_micros", "to_price_micros", "fields", "changed_at")
    .where({ listing_id: listingId })
    .orderBy("id")) as ListingChangeRow[];
}

/** active → retired; the record stays for receipts. The retired row, or undefined when it was not active. */
export async function retireListing(q: Db, id: string): Promise<ListingRow | undefined> {
  const [row] = (await q("listings")
    .where({ id, status: "active" })
    .update({ status: "retired", retired_at: q.fn.now(), updated_at: q.fn.now() })
    .returning(listingColumns(q) as never)) as ListingRow[];
  return row;
}

const COLUMN_NAMES = [
  "id",
  "seller_id",
  "slug",
  "name",
  "description",
  "long_description",
  "category",
  "endpoint_url",
  "pricing_model",
  "price_micros",
  "currency",
  "input_schema",
  "output_schema",
  "tags",
  "status",
  "version",
  "safe_to_retry",
  "max_latency_ms",
  "rate_limit",
  "concurrency_limit",
  "public_supply_origin",
  "platform_hosted",
  "tool_id",
  "listing_type",
  "delivery_method",
  "runtime",
  "data_retention",
  "allowed_use",
  "risk_flags",
  "required_scopes",
  "featured",
  "tumbler_enabled",
  "review_status",
  "review_score",
  "review_notes",
  "reviewed_at",
  "reviewed_by",
  "proxy_mode",
  "proxy_upstream_url",
  "proxy_headers",
  "proxy_strip_path",
  "verification_status",
  "verified_at",
  "retired_at",
  "last_success_at",
  "created_at",
  "updated_at",
];

/** Every listing column but the generated search vector (never sent to Node), table-qualified. */
export const LISTING_COLUMNS = COLUMN_NAMES.map((c) => `listings.${c}`).join(", ");

/** The task-alias read's two texts: alone, and with the catalog generation of its snapshot. */
const TASK_ALIAS_SQL = { plain: taskAliasSql(false), withGeneration: taskAliasSql(true) };

export function listingColumns(q: Db): Knex.Raw {
  return q.raw(LISTING_COLUMNS);
}

export type Lane = "featured" | "search" | "registry";

/** A seller's listing locked for update, so concurrent changes cannot lose a version bump. */
export async function lockOwnedListing(
  trx: Knex.Transaction,
  id: string,
  sellerId: string,
): Promise<ListingRow | undefined> {
  return (await trx("listings")
    .select(listingColumns(trx))
    .where({ id, seller_id: sellerId })
    .forUpdate()
    .first()) as ListingRow | undefined;
}

/** A seller's listings, newest first (seller status). */
export async function listSellerListings(q: Db, sellerId: string): Promise<ListingRow[]> {
  return (await q("listings")
    .select(listingColumns(q))
    .where({ seller_id: sellerId })
    .orderBy("created_at", "desc")) as ListingRow[];
}
