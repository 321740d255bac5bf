import type { Db } from "../../db/knex.js";

// Short histories for people reading a listing (the listing page's charts) and the status page.

const TODAY = "(now() at time zone 'utc')::date";

export interface UptimeDay {
  day: string;
  probes: number;
  ok_probes: number;
}

/** Health-probe counts per UTC day over the last `days` days, oldest first (days without probes omitted). */
export async function uptimeDays(q: Db, listingId: string, days: number): Promise<UptimeDay[]> {
  const { rows } = await q.raw(
    `select to_char(day, 'YYYY-MM-DD') as day, probes::int as probes, ok_probes::int as ok_probes
       from health_probe_days
      where listing_id = ? and day > ${TODAY} - ?::int
      order by day`,
    [listingId, days],
  );
  return rows;
}

export interface ProbeLatency {
  probed_at: Date;
  ok: boolean;
  latency_ms: number | null;
}

/** The listing's last `limit` health probes, oldest first. */
export async function recentProbeLatencies(q: Db, listingId: string, limit: number): Promise<ProbeLatency[]> {
  const rows = await q("health_probes")
    .where({ listing_id: listingId })
    .orderBy([
      { column: "probed_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit)
    .select("probed_at", "ok", "latency_ms");
  return rows.reverse();
}

export interface HostedToolUptime {
  listing_id: string;
  name: string;
  probes_30d: number;
  ok_probes_30d: number;
  last_probe_ok: boolean | null;
  last_probed_at: Date | null;
}

/** The platform's own active listings (first-party tools) with their 30-day probe counts. */
export async function hostedToolsUptime(q: Db): Promise<HostedToolUptime[]> {
  const { rows } = await q.raw(
    `select l.id as listing_id, l.name,
            coalesce(sum(d.probes), 0)::int as probes_30d,
            coalesce(sum(d.ok_probes), 0)::int as ok_probes_30d,
            (select p.ok from health_probes p where p.listing_id = l.id
              order by p.probed_at desc, p.id desc limit 1) as last_probe_ok,
            (select p.probed_at from health_probes p where p.listing_id = l.id
              order by p.probed_at desc, p.id desc limit 1) as last_probed_at
       from listings l
       left join health_probe_days d on d.listing_id = l.id and d.day > ${TODAY} - 30
      where l.status = 'active' and l.public_supply_origin = 'first_party_service'
      group by l.id, l.name
      order by l.name, l.id
      limit 100`,
  );
  return rows;
}
