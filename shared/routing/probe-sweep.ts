import type { JobsOptions } from "bullmq";
import {
  activeListingIdsAfter,
  findListing,
  recordProbe,
  type VerificationStatus,
} from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { logger } from "../log.js";
import { getQueue } from "../queues.js";
import { type CircuitState, recordProbeOutcome } from "./circuit-breaker.js";
import { circuitSeen } from "./circuit-view.js";
import { probeEndpoint } from "./health-probe.js";

// The health-probes queue's work (docs/routing.md "Health probes and the circuit breaker"): the periodic
// sweep that fans out one probe job per active listing, and each probe recorded in the catalog and the
// circuit breaker. The worker shell (workers/health-probes.ts) only validates jobs and dispatches here.

/** The one BullMQ job scheduler of this queue: every HEALTH_PROBE_INTERVAL_MS it adds a sweep job. */
export const PROBE_SWEEP_SCHEDULER_ID = "probe-sweep";

/** Listings read (and probe jobs added) per round trip of a sweep. */
const SWEEP_PAGE = 1000;

// One try per probe: the next sweep is its retry, and a probe retried later would record a stale time.
// Completed probes are removed at once: their result lives in PostgreSQL, and 100k listings would
// otherwise keep 100k finished jobs per interval in Redis.
const PROBE_JOB_OPTIONS: JobsOptions = {
  attempts: 1,
  removeOnComplete: true,
  removeOnFail: { age: 24 * 3600, count: 1000 },
};

export type ProbeOutcome =
  | {
      status: "probed";
      ok: boolean;
      verification_status: VerificationStatus | null;
      /** null when Redis could not record it (the probe itself is already recorded). */
      circuit: CircuitState | null;
    }
  | { status: "skipped"; reason: "listing_not_found" | "listing_retired" };

/**
 * Probes one listing and records it: the probe row and day count, the reachable/failed verdict (never
 * over 'verified'), and the circuit breaker. Retired and unknown listings are skipped, since a sweep may
 * have enqueued them just before they changed. Safe to run again: each run is one more probe.
 */
export async function processHealthProbe(payload: { listing_id: string }): Promise<ProbeOutcome> {
  const listing = await findListing(db(), payload.listing_id);
  if (!listing) return { status: "skipped", reason: "listing_not_found" };
  if (listing.status !== "active") return { status: "skipped", reason: "listing_retired" };
  const result = await probeEndpoint(listing.endpoint_url);
  const verification = await recordProbe(
    db(),
    {
      listing_id: listing.id,
      ok: result.ok,
      http_status: result.httpStatus,
      latency_ms: result.latencyMs,
      error: result.error,
    },
    getConfig().healthProbeFailuresToFail,
  );
  let circuit: CircuitState | null = null;
  try {
    circuit = await recordProbeOutcome(listing.id, result.ok);
    circuitSeen(listing.id, circuit);
  } catch (err) {
    // The probe is recorded; failing the job would only probe again. The next probe feeds the breaker.
    logger().warn({ err, listing_id: listing.id }, "could not record the probe in the circuit breaker");
  }
  return { status: "probed", ok: result.ok, verification_status: verification, circuit };
}

/**
 * The fan-out: one delayed probe job per active listing, jobId `probe-<listing>-<slot>` (slot = the
 * interval the sweep belongs to, so a retried sweep does not probe twice), each delayed at random up to
 * HEALTH_PROBE_JITTER_MS so probes do not arrive at sellers in one burst. Returns the number enqueued.
 */
export async function processProbeSweep(sweptAtMs: number = Date.now()): Promise<number> {
  const { healthProbeIntervalMs, healthProbeJitterMs } = getConfig();
  // With the scheduler off (interval 0) a manual sweep still gets a slot: one per second.
  const slot = Math.floor(sweptAtMs / Math.max(healthProbeIntervalMs, 1000));
  const queue = getQueue("health-probes");
  let after: string | null = null;
  let enqueued = 0;
  for (;;) {
    const ids = await activeListingIdsAfter(db(), after, SWEEP_PAGE);
    if (ids.length === 0) break;
    await queue.addBulk(
      ids.map((id) => ({
        name: "probe",
        data: { listing_id: id },
        opts: {
          ...PROBE_JOB_OPTIONS,
          jobId: `probe-${id}-${slot}`,
          delay: Math.floor(Math.random() * healthProbeJitterMs),
        },
      })),
    );
    enqueued += ids.length;
    after = ids[ids.length - 1]!;
    if (ids.length < SWEEP_PAGE) break;
  }
  return enqueued;
}

/**
 * Upserts the probe-sweep job scheduler (idempotent: every worker process calls it at start, and the
 * same settings keep the same next run), or removes it when HEALTH_PROBE_INTERVAL_MS is 0.
 */
export async function scheduleProbeSweep(): Promise<"scheduled" | "disabled"> {
  const { healthProbeIntervalMs } = getConfig();
  const queue = getQueue("health-probes");
  if (healthProbeIntervalMs === 0) {
    await queue.removeJobScheduler(PROBE_SWEEP_SCHEDULER_ID);
    return "disabled";
  }
  await queue.upsertJobScheduler(
    PROBE_SWEEP_SCHEDULER_ID,
    { every: healthProbeIntervalMs },
    {
      name: "sweep",
      data: { sweep: true },
      opts: { attempts: 3, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
    },
  );
  return "scheduled";
}
