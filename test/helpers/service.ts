import type { Server } from "node:http";
import type { Worker } from "bullmq";
import { HOUSEKEEPING } from "../../api/housekeeping.js";
import { createHttpServer } from "../../api/http-server.js";
import { getConfig } from "../../shared/config.js";
import { closeDb } from "../../shared/db/knex.js";
import { startSweeper } from "../../shared/outbox/outbox.js";
import { closeQueues, getQueue } from "../../shared/queues.js";
import { startExecutionsWorker } from "../../workers/executions.js";

export interface TestService {
  baseUrl: string;
  worker: Worker | undefined;
  stop(): Promise<void>;
}

/**
 * The API on this file's port (so the worker reaches the first-party echo provider there), with an
 * executions worker and the outbox sweeper unless told otherwise.
 */
export async function startService(
  options: { worker?: boolean; sweeper?: boolean } = {},
): Promise<TestService> {
  const config = getConfig();
  const server: Server = createHttpServer().listen(config.port, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const worker = options.worker === false ? undefined : startExecutionsWorker();
  await worker?.waitUntilReady();
  const sweeper = options.sweeper === false ? undefined : startSweeper(HOUSEKEEPING);
  return {
    baseUrl: `http://127.0.0.1:${config.port}`,
    worker,
    async stop() {
      await sweeper?.stop();
      await worker?.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      for (const queue of ["executions"] as const)
        await getQueue(queue)
          .obliterate({ force: true })
          .catch(() => {});
      await closeQueues();
      await closeDb();
    },
  };
}
