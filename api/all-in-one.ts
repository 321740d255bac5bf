// `npm start`: the API and every worker in one process on a single machine. Uses DATABASE_URL and
// REDIS_URL when set; otherwise starts an embedded PostgreSQL and a local redis-server, and migrates.
// DEV_CHAIN=1 also starts a local EVM with the test token and makes it the settlement rail.
import { getAddress, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { setDevChain } from "../shared/chain/dev-chain.js";
import { getConfig, loadConfigOrExit, overrideConfig } from "../shared/config.js";
import { db } from "../shared/db/knex.js";
import { migrateLatest } from "../shared/db/migrate.js";
import { RedisNotInstalled, startEmbeddedPostgres, startLocalRedis } from "../shared/infra/embedded.js";
import { handleSignals, onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { QUEUE_NAMES } from "../shared/queue-names.js";
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

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const say = (message: string) => logger().info(message);
  handleSignals();
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
  if (config.devChain) await startDevChain(say);
  await startWorkers(QUEUE_NAMES);
  await startWeb();
  say(`Agent Market is up: ${getConfig().publicBaseUrl} (try GET /api/health)`);
}

main().catch((err) => {
  if (err instanceof RedisNotInstalled) {
    console.error(err.message);
  } else {
    logger().fatal({ err }, "could not start");
  }
  process.exit(1);
});
