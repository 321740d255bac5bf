import type { Worker } from "bullmq";
import type { QueueName } from "../shared/queue-names.js";
import { startExecutionsWorker } from "./executions.js";
import { startHealthProbesWorker } from "./health-probes.js";
import { startIdleWorker } from "./idle.js";
import { startPayoutsWorker } from "./payouts.js";
import { startSettlementConfirmationsWorker } from "./settlement-confirmations.js";

/** Every registry queue maps to the function that starts its worker; the type refuses a missing one. */
export const WORKERS: Record<QueueName, () => Worker> = {
  executions: startExecutionsWorker,
  "verification-probes": () => startIdleWorker("verification-probes"),
  "monitoring-runs": () => startIdleWorker("monitoring-runs"),
  "health-probes": startHealthProbesWorker,
  "settlement-confirmations": startSettlementConfirmationsWorker,
  payouts: startPayoutsWorker,
};
