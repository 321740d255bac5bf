/**
 * The six queues of the design (DESIGN §1). The queue name, the worker file and the Procfile process are
 * this same string; test/infra/procfile.test.ts keeps them in agreement.
 */
export const QUEUE_NAMES = [
  "executions",
  "verification-probes",
  "monitoring-runs",
  "health-probes",
  "settlement-confirmations",
  "payouts",
] as const;

export type QueueName = (typeof QUEUE_NAMES)[number];

export function isQueueName(value: string): value is QueueName {
  return (QUEUE_NAMES as readonly string[]).includes(value);
}

/** EXECUTIONS_CONCURRENCY, VERIFICATION_PROBES_CONCURRENCY, … */
export function concurrencyVariable(queue: QueueName): string {
  return `${queue.toUpperCase().replaceAll("-", "_")}_CONCURRENCY`;
}
