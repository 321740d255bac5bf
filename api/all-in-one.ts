// The API and every worker in one process on a single machine (`npm start` runs it through
// launcher.ts). Uses DATABASE_URL and REDIS_URL when set; otherwise starts an embedded PostgreSQL and a
// local redis-server, and migrates. DEV_CHAIN=1 also starts a local EVM with the test token and makes it
// the settlement rail. A start that fails stops whatever it had started before exiting non-zero.
import { getAddress, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { setDevChain } from "../shared/chain/dev-chain.js";
import { getConfig, loadConfigOrExit, overrideConfig } from "../shared/config.js";
import { db } from "../shared/db/knex.js";
import { migrateLatest } from "../shared/db/migrate.js";
import { RedisNotInstalled, startEmbeddedPostgres, startLocalRedis } from "../shared/infra/embedded.js";
import { assertPortsFree, isAddressInUse, type NeededPort, PortInUse } from "../shared/infra/ports.js";
import { handleSignals, onShutdown, shutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { startTracing, stopTracing } from "../shared/observability/tracing.js";
import { QUEUE_NAMES } from "../shared/queue-names.js";
import { runExecutionsInThisProcess } from "../workers/executions.js";
import { startWorkers } from "../workers/start.js";
import { startWeb } from "./server.js";

/**
 * DEV_CHAIN=1: a local chain (Hardhat, imported only in this mode) mining a block every second so
 * confirmations progress, TestUSDC deployed, and a fresh platform signer funded with gas ETH — all set
 * as the settlement rail before the API and workers start. The minter stays inside the chain object,
 * handed to the dev routes in-process (setDevChain), never through the environment.
 */
async function startDevChain(say: (message: string) => void): Promise<void> {
  const { startLocalChain } = await import("../shared/chain/local-chain.js");
  const chain = await startLocalChain({ port: getConfig().devChainPort, intervalMiningMs: 1000 });
  onShutdown("dev chain", "embedded", chain.stop);
  const platformKey = generatePrivateKey();
  const platform = privateKeyToAccount(platformKey).address;
  await chain.fundEth(platform, parseEther("100"));
  overrideConfig({
    chainRpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    chainName: "Local Hardhat (DEV_CHAIN)",
    usdcAddress: getAddress(chain.tokenAddress),
    platformSignerKey: platformKey,
    platformAddress: undefined,
    chainConfirmations: 2,
  });
  setDevChain(chain);
  say(
    `DEV_CHAIN: local EVM at ${chain.rpcUrl} (chain id ${chain.chainId}), TestUSDC ${chain.tokenAddress}, ` +
      `platform address ${platform}; GET /api/dev/chain, POST /api/dev/faucet. State is lost on exit.`,
  );
}

/** The fixed ports this start will bind, each with the variable that moves it. */
function neededPorts(): NeededPort[] {
  const config = getConfig();
  const ports: NeededPort[] = [{ variable: "PORT", port: config.port, host: config.host }];
  if (config.devChain)
    ports.push({ variable: "DEV_CHAIN_PORT", port: config.devChainPort, host: "127.0.0.1" });
  return ports;
}

/** A bind that failed after the pre-flight check (a race) is reported like the pre-flight finding. */
function asPortInUse(err: unknown, needed: NeededPort | undefined): unknown {
  return needed && isAddressInUse(err) ? new PortInUse(needed) : err;
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const say = (message: string) => logger().info(message);
  handleSignals();
  // Started by launcher.ts: stop if it goes away, so nothing outlives `npm start`.
  process.once("disconnect", () => {
    shutdown("launcher gone").then(() => process.exit(0));
  });
  const ports = neededPorts();
  const [apiPort, chainPort] = ports;
  await assertPortsFree(ports);
  if (!config.redisUrl) {
    const redis = await startLocalRedis(say);
    onShutdown("embedded redis", "embedded", redis.stop);
    overrideConfig({ redisUrl: redis.url });
  }
  if (!config.databaseUrl) {
    const postgres = await startEmbeddedPostgres(config.embeddedDataDir, say);
    onShutdown("embedded postgres", "embedded", postgres.stop);
    overrideConfig({ databaseUrl: postgres.url });
  }
  const applied = await migrateLatest(db());
  if (applied.length > 0) say(`applied ${applied.length} migrations`);
  if (config.devChain) await startDevChain(say).catch((err) => Promise.reject(asPortInUse(err, chainPort)));
  if (await startTracing("agentmarket")) onShutdown("tracing", "clients", stopTracing);
  // The workers reach first-party tools (echo…) through this process's HTTP server: it listens before
  // they take a job (a job left from the last run would otherwise meet a refused connection and count
  // against the tool's circuit), and they drain before it closes.
  await startWeb().catch((err) => Promise.reject(asPortInUse(err, apiPort)));
  await startWorkers(QUEUE_NAMES, "hosted work");
  // Both halves live here: an execute runs in its own request, the queue stays the fallback.
  runExecutionsInThisProcess();
  say(`Agent Market is up: ${getConfig().publicBaseUrl} (try GET /api/health)`);
}

main().catch(async (err) => {
  await shutdown("start failed");
  if (err instanceof RedisNotInstalled || err instanceof PortInUse) {
    console.error(err.message);
  } else {
    logger().fatal({ err }, "could not start");
  }
  process.exit(1);
});
