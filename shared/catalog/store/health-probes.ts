import type { Db } from "../../db/knex.js";
import { preparedRaw, UTC_TODAY_SQL } from "../../db/prepared.js";
import { type HealthFacts, NO_HEALTH } from "../listing-facts.js";
import type { VerificationStatus } from "./listings.js";

export interface NewProbe {
  listing_id: string;
  ok: boolean;
  http_status: number | null;
  latency_ms: number | null;
  error: string | null;
}

export interface ProbeRow extends NewProbe {
  id: string;
  probed_at: Date;
}

// Days are UTC dates (UTC_TODAY_SQL) on both the write and the read side, so a probe lands in the bucket
// it is read from.

/**
 * Records one probe in a single statement: the probe row, its day count, and the listing's verdict.
 * A success makes the listing 'reachable'; a failure makes it 'failed' only when the `failuresToFail - 1`
 * probes before it failed too. 'verified' belongs to the verification service and is never touched,
 * and neither is updated_at (a verdict is not a listing change). Returns the verdict after the probe.
 */
export async function recordProbe(
  q: Db,
  probe: NewProbe,
  failuresToFail: number,
): Promise<VerificationStatus | null> {
  const id = probe.listing_id;
  const target: VerificationStatus = probe.ok ? "reachable" : "failed";
  const earlier = failuresToFail - 1;
  // Data-modifying CTEs see the snapshot from before the statement: `earlier` holds the previous probes.
  const result = await q.raw(
    `with probe as (
       insert into health_probes (listing_id, ok, http_status, latency_ms, error)
       values (?, ?, ?::int, ?::int, ?) returning id
     ), day as (
       insert into health_probe_days as d (listing_id, day, probes, ok_probes) values (?, ${UTC_TODAY_SQL}, 1, ?)
       on conflict (listing_id, day) do update
         set probes = d.probes + 1, ok_probes = d.ok_probes + excluded.ok_probes
       returning 1
     ), earlier as (
       select ok from health_probes where listing_id = ? order by probed_at desc, id desc limit ?
     ), verdict as (
       update listings set verification_status = ?
        where id = ?
          and verification_status is distinct from 'verified'
          and verification_status is distinct from ?
          and (?::boolean or (select count(*) from earlier where not ok) = ?)
       returning verification_status
     )
     select coalesce((select verification_status from verdict),
                     (select verification_status from listings where id = ?)) as verification_status`,
    [
      id,
      probe.ok,
      probe.http_status,
      probe.latency_ms,
      probe.error,
      id,
      probe.ok ? 1 : 0,
      id,
      earlier,
      target,
      id,
      target,
      probe.ok,
      earlier,
      id,
    ],
  );
  return result.rows[0]?.verification_status ?? null;
}

/** Probes of one listing, newest first (tests and operators). */
export async function listProbes(q: Db, listingId: string, limit = 50): Promise<ProbeRow[]> {
  return (await q("health_probes")
    .where({ listing_id: listingId })
    .orderBy([
      { column: "probed_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit)) as ProbeRow[];
}

/** One page of active listing ids in id order (keyset paging, so a sweep over 100k rows stays cheap). */
export async function activeListingIdsAfter(q: Db, afterId: string | null, limit: number): Promise<string[]> {
  const query = q("listings").select("id").where({ status: "active" }).orderBy("id").limit(limit);
  if (afterId) query.where("id", ">", afterId);
  return (await query).map((row: { id: string }) => row.id);
}

/**
 * A page's health reads, as named statements (shared/db/prepared.ts): planned once per connection, not on
 * every page (docs/benchmarks.md "The thirty-seventh round"). The days are summed per listing (a lateral
 * probe of the key's index), not grouped over `listing_id = any(…)`: a generic plan of the grouped form
 * made while the table was small read it whole once it had grown. Exported for the plan test
 * (test/catalog/health-facts-plan.test.ts), which checks that a plan kept from small tables reads by index.
 */
export const HEALTH_DAYS_SQL = `select l.id as listing_id, d.count_7d, d.ok_7d, d.count_30d, d.ok_30d
   from unnest(?::uuid[]) as l(id)
   cross join lateral (
     select coalesce(sum(probes) filter (where day > ${UTC_TODAY_SQL} - 7), 0) as count_7d,
            coalesce(sum(ok_probes) filter (where day > ${UTC_TODAY_SQL} - 7), 0) as ok_7d,
            sum(probes) as count_30d,
            sum(ok_probes) as ok_30d
       from health_probe_days
      where listing_id = l.id and day > ${UTC_TODAY_SQL} - 30
   ) d
  where d.count_30d is not null`;

/** Each listing's latest probe: one index probe a listing. */
export const LATEST_PROBES_SQL = `select l.id as listing_id, p.ok, p.probed_at
   from unnest(?::uuid[]) as l(id)
   cross join lateral (
     select ok, probed_at from health_probes
      where listing_id = l.id order by probed_at desc, id desc limit 1
   ) p`;

/**
 * Health facts for a page of listings in two queries, whatever the page size: 7- and 30-day counts from
 * the daily buckets (the last 7 and 30 UTC dates, today included) and the latest probe of each listing
 * (one index probe per listing). Probe latency is kept per row but not read here: telemetry latency
 * comes from provider attempts, what a buyer actually waits for.
 */
export async function readHealthFacts(q: Db, listingIds: string[]): Promise<Map<string, HealthFacts>> {
  const facts = new Map(listingIds.map((id) => [id, { ...NO_HEALTH }]));
  if (listingIds.length === 0) return facts;
  const [days, latest] = await Promise.all([
    preparedRaw(q, HEALTH_DAYS_SQL, [listingIds]),
    preparedRaw(q, LATEST_PROBES_SQL, [listingIds]),
  ]);
  for (const row of days.rows) {
    Object.assign(facts.get(row.listing_id)!, {
      probe_count_7d: Number(row.count_7d),
      probe_success_7d: Number(row.ok_7d),
      probe_count_30d: Number(row.count_30d),
      probe_success_30d: Number(row.ok_30d),
    });
  }
  for (const row of latest.rows) {
    Object.assign(facts.get(row.listing_id)!, {
      latest_status: row.ok ? "healthy" : "unhealthy",
      latest_probe_at: row.probed_at,
    });
  }
  return facts;
}
