import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { getConfig } from "../config.js";
import { QUEUE_NAMES } from "../queue-names.js";
import { getQueue } from "../queues.js";

// The Prometheus registry and every metric definition (docs/operations.md "Metrics"). One registry per
// process: the web process serves it at /metrics, each worker process on WORKER_METRICS_PORT.
//
// Labels are bounded on purpose: route TEMPLATES (never raw paths), queue names, a handful of outcomes
// and states. No listing, agent, payout or invocation id is ever a label value.
//
// Gauges that need SQL or another context (payouts by state, ledger totals, settlement lag, breakers)
// are registered by the operations context through addCollector(): infrastructure knows no context.

export const registry = new Registry();
registry.setDefaultLabels({ service: "agentmarket" });
// Process metrics (CPU, memory, event-loop lag, GC): the first thing to read when a pool is slow.
collectDefaultMetrics({ register: registry, prefix: "agentmarket_" });

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const httpRequests = new Counter({
  name: "agentmarket_http_requests_total",
  help: "HTTP requests by method, route template and status",
  labelNames: ["method", "route", "status"] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: "agentmarket_http_request_duration_seconds",
  help: "HTTP request duration by method, route template and status class",
  labelNames: ["method", "route", "status_class"] as const,
  buckets: DURATION_BUCKETS,
  registers: [registry],
});

export const jobDuration = new Histogram({
  name: "agentmarket_job_duration_seconds",
  help: "Duration of one job run by queue and outcome (completed, failed)",
  labelNames: ["queue", "outcome"] as const,
  buckets: DURATION_BUCKETS,
  registers: [registry],
});

export const providerAttempts = new Counter({
  name: "agentmarket_provider_attempts_total",
  help: "Provider calls made by the executions worker, by outcome (succeeded, failed, timeout, …)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

/**
 * Catalog pages asked of the kept pages (shared/catalog/store/page-cache.ts): "hit" served from a kept
 * page proved current, "moved" kept but the catalog had moved since (read afresh), "miss" none kept.
 */
export const catalogPageCache = new Counter({
  name: "agentmarket_catalog_page_cache_total",
  help: "Catalog pages by how the kept pages answered them (hit, moved, miss)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

export const catalogRecordCache = new Counter({
  name: "agentmarket_catalog_record_cache_total",
  help: "Listing records on catalog pages by how the kept records answered them (hit, changed, miss)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

/**
 * Every statement this process sends through knex (its "query" event, transaction BEGIN/COMMIT
 * included), unlabelled so that counting costs one increment: `bench:execute` divides it by the
 * executes it ran to print statements per execute.
 */
export const dbStatements = new Counter({
  name: "agentmarket_db_statements_total",
  help: "PostgreSQL statements sent through knex by this process (transaction control included)",
  registers: [registry],
});

/**
 * Statements sent without waiting for the answer of the one before them on their connection
 * (shared/db/pipeline.ts): a transaction's BEGIN, and all but the first of a flight. Statements minus
 * these are the round trips the process waited for; `bench:execute` prints both per execute.
 */
export const dbStatementsPipelined = new Counter({
  name: "agentmarket_db_statements_pipelined_total",
  help: "PostgreSQL statements sent in the flight of another, without waiting for its answer",
  registers: [registry],
});

/**
 * Group commits (shared/db/group-commit.ts): statements sent by each and the rows they carried, so that
 * rows / statements is the mean group size under the load of the moment.
 */
export const groupCommitStatements = new Counter({
  name: "agentmarket_db_group_commit_statements_total",
  help: "Statements sent by a group commit (a lone write counts as one statement of one row)",
  labelNames: ["group"],
  registers: [registry],
});
export const groupCommitRows = new Counter({
  name: "agentmarket_db_group_commit_rows_total",
  help: "Rows written by a group commit's statements",
  labelNames: ["group"],
  registers: [registry],
});
export const groupCommitSplits = new Counter({
  name: "agentmarket_db_group_commit_splits_total",
  help: "Grouped statements that failed and whose rows were sent again one by one",
  labelNames: ["group"],
  registers: [registry],
});

/** Times a worker's finished jobs (a job moved back to delayed to wait is neither). */
export function observeJobs(worker: {
  name: string;
  on(event: "completed" | "failed", listener: (job: JobTimes | undefined) => void): unknown;
}): void {
  const observe = (outcome: string) => (job: JobTimes | undefined) => {
    if (job?.processedOn && job.finishedOn)
      jobDuration.observe({ queue: worker.name, outcome }, (job.finishedOn - job.processedOn) / 1000);
  };
  worker.on("completed", observe("completed"));
  worker.on("failed", observe("failed"));
}

interface JobTimes {
  processedOn?: number;
  finishedOn?: number;
}

/** The same job-state names BullMQ's getJobCounts uses. */
export const QUEUE_STATES = ["waiting", "active", "delayed", "failed"] as const;

let queueCountsAt = 0;
let queueCounts: Map<string, Record<string, number>> | undefined;
let queueCountsPending: Promise<void> | undefined;

async function refreshQueueCounts(): Promise<void> {
  const entries = await Promise.all(
    QUEUE_NAMES.map(async (name) => [name, await getQueue(name).getJobCounts(...QUEUE_STATES)] as const),
  );
  queueCounts = new Map(entries);
  queueCountsAt = Date.now();
}

new Gauge({
  name: "agentmarket_queue_jobs",
  help: "Jobs per queue and state (cached for QUEUE_METRICS_CACHE_MS, so a scrape costs Redis little)",
  labelNames: ["queue", "state"] as const,
  registers: [registry],
  async collect() {
    if (!queueCounts || Date.now() - queueCountsAt >= getConfig().queueMetricsCacheMs) {
      queueCountsPending ??= refreshQueueCounts().finally(() => {
        queueCountsPending = undefined;
      });
      await queueCountsPending.catch(() => {});
    }
    this.reset();
    for (const [queue, counts] of queueCounts ?? []) {
      for (const state of QUEUE_STATES) this.set({ queue, state }, counts[state] ?? 0);
    }
  },
});

/** A source of gauge values computed on scrape (SQL, Redis), registered by the operations context. */
export type Collector = () => Promise<void>;
const collectors: Collector[] = [];

/** Adds a collector run before each scrape; a failing one is counted, never fails the scrape. */
export function addCollector(collector: Collector): void {
  if (!collectors.includes(collector)) collectors.push(collector);
}

const collectorErrors = new Counter({
  name: "agentmarket_metrics_collector_errors_total",
  help: "Scrapes in which a gauge source (SQL, Redis) failed; its gauges keep their last values",
  registers: [registry],
});

/** The exposition text (Prometheus text format 0.0.4), after running every collector. */
export async function metricsText(): Promise<string> {
  await Promise.all(
    collectors.map((c) =>
      c().catch(() => {
        collectorErrors.inc();
      }),
    ),
  );
  return registry.metrics();
}

export const METRICS_CONTENT_TYPE = registry.contentType;
