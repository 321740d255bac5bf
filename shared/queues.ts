import { SpanKind } from "@opentelemetry/api";
import { type Static, type TObject, Type } from "@sinclair/typebox";
import { Job, type JobsOptions, Queue, QueueEvents } from "bullmq";
import { getConfig } from "./config.js";
import { inSpan, jobMeta } from "./observability/tracing.js";
import { QUEUE_NAMES, type QueueName } from "./queue-names.js";
import { createRedis, type RedisClient } from "./redis.js";

const id = Type.String({ format: "uuid" });
const closed = { additionalProperties: false } as const;

const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: "exponential", delay: 500, jitter: 0.5 },
  removeOnComplete: { age: 3600, count: 10000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/**
 * The queue registry: every queue of DESIGN §1 with its payload schema and job options. Payloads carry
 * ids only; workers reload rows. Job ids are row UUIDs (no ':'), so enqueueing twice is harmless.
 */
export const QUEUES = {
  executions: { payload: Type.Object({ invocation_id: id }, closed), jobOptions: DEFAULT_JOB_OPTIONS },
  "verification-probes": { payload: Type.Object({ order_id: id }, closed), jobOptions: DEFAULT_JOB_OPTIONS },
  "monitoring-runs": {
    payload: Type.Object({ subscription_id: id }, closed),
    jobOptions: DEFAULT_JOB_OPTIONS,
  },
  // One probe ({listing_id}) or the fan-out that enqueues them ({sweep: true}, from the probe-sweep
  // scheduler): exactly one of the two (docs/routing.md "Health probes and the circuit breaker").
  "health-probes": {
    payload: Type.Object(
      { listing_id: Type.Optional(id), sweep: Type.Optional(Type.Literal(true)) },
      { ...closed, minProperties: 1, maxProperties: 1 },
    ),
    jobOptions: DEFAULT_JOB_OPTIONS,
  },
  // A deposit to confirm and credit ({deposit_id}), with the x402 gateway an x402 settlement to submit
  // and confirm ({settlement_id}), or a submitted seller payout to confirm ({payout_id}): exactly one
  // (docs/payments.md "Deposits", "Payouts").
  "settlement-confirmations": {
    payload: Type.Object(
      { deposit_id: Type.Optional(id), settlement_id: Type.Optional(id), payout_id: Type.Optional(id) },
      { ...closed, minProperties: 1, maxProperties: 1 },
    ),
    jobOptions: DEFAULT_JOB_OPTIONS,
  },
  // One payout to submit ({payout_id}) or the batch that creates them ({sweep: true}, from the
  // payout-sweep scheduler): exactly one of the two (docs/payments.md "Payouts").
  payouts: {
    payload: Type.Object(
      { payout_id: Type.Optional(id), sweep: Type.Optional(Type.Literal(true)) },
      { ...closed, minProperties: 1, maxProperties: 1 },
    ),
    jobOptions: DEFAULT_JOB_OPTIONS,
  },
} as const satisfies Record<QueueName, { payload: TObject; jobOptions: JobsOptions }>;

/**
 * What a job carries besides its payload, under `meta` (docs/operations.md "Traces"): the W3C trace
 * context of the span that enqueued it and the request id that caused it. Workers validate it apart
 * from the payload (workers/payload.ts) and hand the payload alone to the processor.
 */
export const JobMeta = Type.Object(
  {
    traceparent: Type.Optional(
      Type.String({ pattern: "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$" }),
    ),
    tracestate: Type.Optional(Type.String({ maxLength: 512 })),
    request_id: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9._-]{8,128}$" })),
  },
  closed,
);

export type QueuePayload<Q extends QueueName> = Static<(typeof QUEUES)[Q]["payload"]>;

let producer: RedisClient | undefined;
const queues = new Map<QueueName, Queue>();
const events = new Map<QueueName, QueueEvents>();

function producerConnection(): RedisClient {
  if (!producer) producer = createRedis("producer");
  return producer;
}

/** The producer-side Queue for a registry name (one per process). */
export function getQueue(name: QueueName): Queue {
  let queue = queues.get(name);
  if (!queue) {
    queue = new Queue(name, {
      connection: producerConnection(),
      prefix: getConfig().queuePrefix,
      defaultJobOptions: QUEUES[name].jobOptions,
    });
    // Every API request waiting on a job (waitUntilFinished) adds a 'closing' listener here.
    queue.setMaxListeners(0);
    queues.set(name, queue);
  }
  return queue;
}

/** Requests waiting for a job to end, by queue and job id: settled by the one QueueEvents reader. */
const watchers = new Map<string, Set<(ended: boolean) => void>>();

function settleWatchers(name: QueueName, jobId: string): void {
  const key = `${name}:${jobId}`;
  const waiting = watchers.get(key);
  if (!waiting) return;
  watchers.delete(key);
  for (const settle of waiting) settle(true);
}

/**
 * QueueEvents for awaiting job completion (the API's bounded synchronous wait): one reader of the
 * queue's event stream per process, whose completed and failed events settle every request waiting on
 * that job (watchJob) from one map, instead of two listeners and a Redis round trip per request.
 */
export async function getQueueEvents(name: QueueName): Promise<QueueEvents> {
  let queueEvents = events.get(name);
  if (!queueEvents) {
    queueEvents = new QueueEvents(name, {
      connection: createRedis("worker"),
      prefix: getConfig().queuePrefix,
    });
    queueEvents.setMaxListeners(0);
    queueEvents.on("completed", ({ jobId }) => settleWatchers(name, jobId));
    queueEvents.on("failed", ({ jobId }) => settleWatchers(name, jobId));
    events.set(name, queueEvents);
    await queueEvents.waitUntilReady();
  }
  return queueEvents;
}

/** Whether a request of this process is waiting for this job's end (watchJob). */
export function isWatched(name: QueueName, jobId: string): boolean {
  return watchers.has(`${name}:${jobId}`);
}

/** A wait for one job's end: true when it completed or failed in time, false at the deadline. */
export interface JobWatch {
  ended: Promise<boolean>;
  /** Stops waiting now (the job was never sent): ended answers false. */
  cancel(): void;
}

/**
 * Starts waiting for a job to complete or fail, for at most ms. Call it before enqueueing: the reader
 * only sees events from the moment it is ready, so a watch taken first cannot miss a fast job's end.
 * An event lost to a Redis outage only costs the wait: the caller reads the row after it anyway.
 */
export async function watchJob(name: QueueName, jobId: string, ms: number): Promise<JobWatch> {
  await getQueueEvents(name);
  const key = `${name}:${jobId}`;
  const { watch, settle } = timedWatch(ms, (self) => {
    const waiting = watchers.get(key);
    waiting?.delete(self);
    if (waiting?.size === 0) watchers.delete(key);
  });
  const waiting = watchers.get(key) ?? new Set();
  waiting.add(settle);
  watchers.set(key, waiting);
  return watch;
}

type Settle = (ended: boolean) => void;

/**
 * A JobWatch that settle() ends, or that answers false after ms: settling clears the timer and runs
 * onSettle (given settle itself) first. The one shape of watchJob and of a run in this process.
 */
export function timedWatch(
  ms: number,
  onSettle: (settle: Settle) => void = () => {},
): { watch: JobWatch; settle: Settle } {
  let settle!: Settle;
  const ended = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => settle(false), ms);
    settle = (value) => {
      clearTimeout(timer);
      onSettle(settle);
      resolve(value);
    };
  });
  return { watch: { ended, cancel: () => settle(false) }, settle };
}

/**
 * Adds a job whose id is the row id it acts on, with the trace context and request id of its cause (the
 * one given, else the log scope's: shared/log.ts).
 */
export async function enqueue<Q extends QueueName>(
  name: Q,
  jobId: string,
  payload: QueuePayload<Q>,
  requestId?: string,
): Promise<Job> {
  return inSpan(
    `enqueue ${name}`,
    { kind: SpanKind.PRODUCER, attributes: { "messaging.destination.name": name } },
    () => {
      const meta = jobMeta(requestId);
      return getQueue(name).add(name, meta ? { ...payload, meta } : payload, { jobId });
    },
  );
}

/**
 * Sends again the job of a row that is still open although its queue gave up on the job (failed for good:
 * attempts spent, or stalled more than BullMQ allows) or lost it; leaves a live or completed job alone.
 * True when it sent it. Recovery sweeps call it: a worker's own handling of a job that failed for good
 * runs after the job is failed in Redis, and a worker killed in between leaves nothing to drive the row.
 */
export async function redriveJob<Q extends QueueName>(
  name: Q,
  jobId: string,
  payload: QueuePayload<Q>,
): Promise<boolean> {
  const job = await Job.fromId(getQueue(name), jobId);
  if (!job) {
    await enqueue(name, jobId, payload);
    return true;
  }
  if (!(await job.isFailed())) return false;
  await job.retry("failed");
  return true;
}

/**
 * Round trip to Redis on the producer connection (health). On a cluster PING reaches any one node; the
 * node holding the queues' slot answers health's job counts, which are keyed.
 */
export async function pingRedis(): Promise<string> {
  // The producer connection has no offline queue: wait for it to be connected before the round trip.
  await getQueue("executions").waitUntilReady();
  return producerConnection().ping();
}

export async function closeQueues(): Promise<void> {
  for (const waiting of watchers.values()) for (const settle of waiting) settle(false);
  await Promise.all([...events.values()].map((e) => e.close()));
  await Promise.all([...queues.values()].map((q) => q.close()));
  events.clear();
  queues.clear();
  producer?.disconnect();
  producer = undefined;
}

export { QUEUE_NAMES };
