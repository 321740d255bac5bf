import { db } from "../db/knex.js";
import { requireListing } from "./listing-lookup.js";
import { hostedToolsUptime, recentProbeLatencies, uptimeDays } from "./store/history.js";

const CHART_DAYS = 30;
const CHART_PROBES = 50;

/** A listing's uptime per day (30 days) and its last probes' latencies, for charts; 404 when unknown. */
export async function listingHistory(id: string) {
  await requireListing(id);
  const [days, probes] = await Promise.all([
    uptimeDays(db(), id, CHART_DAYS),
    recentProbeLatencies(db(), id, CHART_PROBES),
  ]);
  return {
    uptime_days: days.map((d) => ({
      day: d.day,
      probes: d.probes,
      uptime_pct: d.probes === 0 ? null : Math.round((1000 * d.ok_probes) / d.probes) / 10,
    })),
    probe_latencies: probes.map((p) => ({
      at: p.probed_at.toISOString(),
      ok: p.ok,
      latency_ms: p.latency_ms,
    })),
  };
}

/** The platform's hosted tools with their 30-day uptime (null without probes). */
export async function hostedTools() {
  const rows = await hostedToolsUptime(db());
  return rows.map((r) => ({
    listing_id: r.listing_id,
    name: r.name,
    uptime_30d_pct: r.probes_30d === 0 ? null : Math.round((1000 * r.ok_probes_30d) / r.probes_30d) / 10,
    probes_30d: r.probes_30d,
    last_probe_ok: r.last_probe_ok,
    last_probed_at: r.last_probed_at ? new Date(r.last_probed_at).toISOString() : null,
  }));
}
