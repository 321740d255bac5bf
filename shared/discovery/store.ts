import { withoutUnavailableTools } from "../catalog/index.js";
import type { Db } from "../db/knex.js";

// The figures of /public-proof.json, read from the rows that are their evidence. Read-only: this
// context writes no table. Each query is a small aggregate over an indexed or small table.

/** knex types an aggregate's row by its count alias only; these rows carry the grouped columns too. */
type Row = Record<string, unknown>;
const rowsOf = (rows: unknown) => rows as Row[];

export interface RouteFigures {
  route: string;
  total: number;
  succeeded: number;
  failed: number;
}

export async function invocationsByRoute(q: Db): Promise<RouteFigures[]> {
  const rows = rowsOf(
    await q("invocations")
      .select("route")
      .count({ total: "*" })
      .select(q.raw("count(*) filter (where status = 'succeeded') as succeeded"))
      .select(q.raw("count(*) filter (where status = 'failed') as failed"))
      .groupBy("route")
      .orderBy("route"),
  );
  return rows.map((r) => ({
    route: String(r.route),
    total: Number(r.total),
    succeeded: Number(r.succeeded),
    failed: Number(r.failed),
  }));
}

export interface OnChainRecord {
  tx_hash: string;
  block_number: string | null;
  at: Date;
}

/** Counts per status, and the newest rows that carry a transaction hash. */
export async function statusCounts(q: Db, table: "x402_payments" | "payouts" | "deposits") {
  const rows = rowsOf(await q(table).select("status").count({ n: "*" }).groupBy("status").orderBy("status"));
  return Object.fromEntries(rows.map((r) => [String(r.status), Number(r.n)]));
}

export async function recentOnChain(q: Db, table: "x402_payments" | "payouts" | "deposits", limit = 5) {
  return q<OnChainRecord>(table)
    .select("tx_hash", q.raw("block_number::text as block_number"), "updated_at as at")
    .whereNotNull("tx_hash")
    .whereNotNull("block_number")
    .orderBy("updated_at", "desc")
    .limit(limit);
}

export async function evidenceByState(q: Db): Promise<Record<string, number>> {
  const rows = rowsOf(
    await q("payment_evidence").select("state").count({ n: "*" }).groupBy("state").orderBy("state"),
  );
  return Object.fromEntries(rows.map((r) => [String(r.state), Number(r.n)]));
}

export async function listingCounts(q: Db) {
  const [row] = rowsOf(
    // A first-party tool whose provider is not configured is not offered, so not counted (docs/tools.md).
    await withoutUnavailableTools(q("listings"))
      .where({ status: "active" })
      .count({ active: "*" })
      .select(q.raw("count(*) filter (where platform_hosted) as hosted")),
  );
  return { active: Number(row?.active ?? 0), hosted: Number(row?.hosted ?? 0) };
}

/** Probes of active platform-hosted listings over the last `days` days. */
export async function hostedProbeTotals(q: Db, days: number) {
  const [row] = await q("health_probe_days as d")
    .join("listings as l", "l.id", "d.listing_id")
    .where("l.platform_hosted", true)
    .andWhere("l.status", "active")
    .andWhereRaw("d.day >= current_date - ?::int", [days])
    .select(
      q.raw("coalesce(sum(d.probes), 0)::int as probes"),
      q.raw("coalesce(sum(d.ok_probes), 0)::int as ok"),
    );
  return { probes: Number(row?.probes ?? 0), ok: Number(row?.ok ?? 0) };
}
