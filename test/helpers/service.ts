import type { Server } from "node:http";
import type { Worker } from "bullmq";
import { HOUSEKEEPING } from "../../api/housekeeping.js";
import { createHttpServer } from "../../api/http-server.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { closeDb } from "../../shared/db/knex.js";
import { freePort } from "../../shared/infra/free-port.js";
import { startInvalidationListener, stopInvalidationListener } from "../../shared/invalidation.js";
import { startSweeper } from "../../shared/outbox/outbox.js";
import { closeQueues, getQueue } from "../../shared/queues.js";
import { type Runner, runExecutionsHere } from "../../shared/routing/index.js";
import { runExecutionHere, startExecutionsWorker } from "../../workers/executions.js";

export interface TestService {
  baseUrl: string;
  worker: Worker | undefined;
  stop(): Promise<void>;
}

/**
 * Listens on this file's PORT. The port was free when setup-env chose it, but it comes from the OS's
 * ephemeral range, which outgoing connections also draw from: on a busy machine another socket may have
 * taken it since. Then the file moves to a new free port (config first, so the echo listing's calls and
 * every helper follow) instead of failing on EADDRINUSE.
 */
async function listenOnThisFilesPort(): Promise<Server> {
  for (let attempt = 1; ; attempt++) {
    const server = createHttpServer();
    const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      server.once("listening", () => resolve(undefined));
      server.once("error", resolve);
      server.listen(getConfig().port, "127.0.0.1");
    });
    if (!error) return server;
    if (error.code !== "EADDRINUSE" || attempt >= 5) throw error;
    const { port: old, firstPartyBaseUrl, publicBaseUrl } = getConfig();
    const port = await freePort();
    // The base URLs derived from the port (the echo listing's calls go to firstPartyBaseUrl) follow it.
    overrideConfig({
      port,
      firstPartyBaseUrl: firstPartyBaseUrl.replace(`:${old}`, `:${port}`),
      publicBaseUrl: publicBaseUrl.replace(`:${old}`, `:${port}`),
    });
  }
}

/**
 * The API on this file's port (so the worker reaches the first-party echo provider there), with an
 * executions worker and the outbox sweeper unless told otherwise. As in npm start's process, executions
 * run in the request that submits them (runs-here.ts) unless runHere is false or there is no worker;
 * runHere may also be another runner, e.g. one that stands for a process dying mid-run.
 */
export async function startService(
  options: { worker?: boolean; sweeper?: boolean; runHere?: boolean | Runner } = {},
): Promise<TestService> {
  const server = await listenOnThisFilesPort();
  const config = getConfig();
  const worker = options.worker === false ? undefined : startExecutionsWorker();
  await worker?.waitUntilReady();
  const runner: Runner | undefined =
    typeof options.runHere === "function"
      ? options.runHere
      : worker && options.runHere !== false
        ? runExecutionHere
        : undefined;
  const here = runner ? runExecutionsHere(runner, config.queueConcurrency.executions) : undefined;
  const sweeper = options.sweeper === false ? undefined : startSweeper(HOUSEKEEPING);
  // As in the API process: its key cache is on and told of revocations.
  await startInvalidationListener();
  return {
    baseUrl: `http://127.0.0.1:${config.port}`,
    worker,
    async stop() {
      await here?.drain();
      await sweeper?.stop();
      await stopInvalidationListener();
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
