import type { Worker } from "bullmq";
import type { QueueName } from "../shared/queue-names.js";
import { startExecutionsWorker } from "./executions.js";
import { startHealthProbesWorker } from "./health-probes.js";
import { startMonitoringRunsWorker } from "./monitoring-runs.js";
import { startPayoutsWorker } from "./payouts.js";
import { startSettlementConfirmationsWorker } from "./settlement-confirmations.js";
import { startVerificationProbesWorker } from "./verification-probes.js";

/** Every registry queue maps to the function that starts its worker; the type refuses a missing one. */
export const WORKERS: Record<QueueName, () => Worker> = {
  executions: startExecutionsWorker,
  "verification-probes": startVerificationProbesWorker,
  "monitoring-runs": startMonitoringRunsWorker,
  "health-probes": startHealthProbesWorker,
  "settlement-confirmations": startSettlementConfirmationsWorker,
  payouts: startPayoutsWorker,
};
