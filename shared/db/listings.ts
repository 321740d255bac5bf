import type { Db } from "./knex.js";

export interface ListingRow {
  id: string;
  seller_id: string | null;
  slug: string;
  name: string;
  description: string;
  category: string;
  endpoint_url: string;
  pricing_model: string;
  price_micros: string;
  currency: string;
  input_schema: Record<string, unknown>;
  output_schema: Record<string, unknown> | null;
  tags: string[];
  status: string;
  version: string;
  safe_to_retry: boolean;
  max_latency_ms: number;
  rate_limit: number;
  concurrency_limit: number;
  public_supply_origin: string;
  platform_hosted: boolean;
  created_at: Date;
  updated_at: Date;
}

/**
 * Active listings answering to a task alias: slug, tag, category or lowercase name (spec "Routing
 * rules"). Exact slug matches first, then cheapest, then oldest, so the choice is deterministic.
 */
export async function findActiveByTaskAlias(q: Db, task: string): Promise<ListingRow[]> {
  const alias = task.trim().toLowerCase();
  return q<ListingRow>("listings")
    .where({ status: "active" })
    .andWhere((w) =>
      w
        .where("slug", alias)
        .orWhereRaw("? = any(tags)", [alias])
        .orWhere("category", alias)
        .orWhereRaw("lower(name) = ?", [alias]),
    )
    .orderByRaw("(slug = ?) desc, price_micros asc, created_at asc", [alias])
    .limit(10);
}

export async function findListing(q: Db, id: string): Promise<ListingRow | undefined> {
  return q<ListingRow>("listings").where({ id }).first();
}
