import { Queue } from "bullmq";
import knexFactory, { type Knex } from "knex";
import { type Address, getAddress, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type LocalChain, startLocalChain } from "../../shared/chain/local-chain.js";
import { freePort } from "../../shared/infra/free-port.js";
import { ChaosClient } from "./client.js";
import { type ChaosCluster, startCluster } from "./cluster.js";
import { type FaultCounts, injectFaults, lateWindowMs } from "./faults.js";
import { buildWorld, Load, type OpKind, type OpRecord, type World } from "./load.js";
import { type ProcessSpec, runOnce, Supervisor } from "./processes.js";
import { Random } from "./random.js";
import { type ChaosSeller, type SellerBehaviour, startChaosSeller } from "./sellers.js";
import {
  drain,
  type Findings,
  findDoubleCharges,
  findDoublePayouts,
  findLost,
  runInvariants,
} from "./verify.js";

// The chaos run (docs/reliability.md "Chaos"): the Procfile's processes as OS processes on a PostgreSQL
// cluster and a Redis of the run's own, a load of free and paid calls, x402 payments, deposits and payouts
// on a local chain, and meanwhile SIGKILLs, a Redis restart, a PostgreSQL immediate restart and sellers
// that hang, reset and answer garbage. Then the drain, and the checks. Used by `npm run chaos` (long) and
// test/reliability/chaos.test.ts (short).

export interface ChaosProfile {
  /** Seconds of load under faults. */
  seconds: number;
  /** SIGKILLs to deliver during the load. */
  kills: number;
  /** A process is SIGKILLed only once it has been ready this long (see faults.ts). */
  minUpMs: number;
  /** Concurrent clients of the load. */
  clients: number;
  /** Operations at most (the load also stops at `seconds`). */
  maxOperations: number;
  seed: number;
  /** How long the drain may take before what is still open counts as lost. */
  drainSeconds: number;
}

export const SHORT_PROFILE: ChaosProfile = {
  seconds: 60,
  kills: 30,
  minUpMs: 3000,
  clients: 12,
  maxOperations: 600,
  seed: 19,
  // Longer than the payout sweep's re-drive of an open payout untouched for 120 s (a payout job BullMQ
  // gave up on after its worker was killed twice while holding it is picked up again only then).
  drainSeconds: 180,
};

export const LONG_PROFILE: ChaosProfile = {
  seconds: 300,
  kills: 120,
  minUpMs: 3000,
  clients: 16,
  maxOperations: 5000,
  seed: 1919,
  drainSeconds: 240,
};

/** The latest the faults of a profile can end, from the load's start: its span and the late window. */
function faultsEndMs(profile: ChaosProfile): number {
  return profile.seconds * 1000 + lateWindowMs(profile.seconds * 1000);
}

/**
 * How long a client retries one operation: two minutes past the latest the faults can end. An operation
 * sent early in the load may meet faults for the whole of it (a 503 while the paid gate is closed, for
 * one), and on a slow machine the late kills stretch it (faults.ts).
 */
function clientRetryMs(profile: ChaosProfile): number {
  return 120_000 + faultsEndMs(profile);
}

/**
 * The longest a run of this profile can take and still report its findings: a minute of setup, the
 * faults, the whole retry budget of an operation sent as they end, and the drain (the test's timeout).
 */
export function worstCaseMs(profile: ChaosProfile): number {
  return 60_000 + faultsEndMs(profile) + clientRetryMs(profile) + profile.drainSeconds * 1000;
}

const OP_WEIGHTS: Record<OpKind, number> = {
  free_execute: 30,
  paid_execute: 20,
  paid_invoke: 20,
  x402_invoke: 20,
  deposit: 10,
};

const X402_START_MICROS = 1_000_000_000n;

export interface ChaosResult {
  profile: ChaosProfile;
  faults: FaultCounts & { seller: Record<SellerBehaviour, number> };
  operations: OpRecord[];
  payouts: Record<string, number>;
  findings: Findings;
  /** Still open after the drain (counted in lost too). */
  stillOpen: Record<string, number>;
  unexpectedExits: Record<string, number>;
  seconds: { setup: number; load: number; drain: number };
}

export async function runChaos(
  profile: ChaosProfile,
  log: (m: string) => void = console.log,
): Promise<ChaosResult> {
  const random = new Random(profile.seed);
  let cluster: ChaosCluster | undefined;
  let chain: LocalChain | undefined;
  let db: Knex | undefined;
  let executions: Queue | undefined;
  const supervisor = new Supervisor(log);
  const sellers: ChaosSeller[] = [];
  const t0 = Date.now();
  const marks: [string, number][] = [];
  const stamp = (what: string) => marks.push([what, Date.now()]);
  const stamps = () => Object.fromEntries(marks.map(([w, t]) => [w, (t - t0) / 1000]));
  try {
    cluster = await startCluster(log);
    chain = await startLocalChain();
    const platformKey = generatePrivateKey();
    const platform: Address = privateKeyToAccount(platformKey).address;
    await chain.fundEth(platform, parseEther("100"));
    const queuePrefix = "{chaos}";
    const ports = [await freePort(), await freePort()];
    const env: Record<string, string> = {
      DATABASE_URL: cluster.postgres.url,
      DATABASE_POOL_MAX: "10",
      REDIS_URL: cluster.redis.url,
      QUEUE_PREFIX: queuePrefix,
      HOST: "127.0.0.1",
      // info: the supervisor learns from "api listening" / "workers started" that a process is up.
      LOG_LEVEL: "info",
      NODE_ENV: "production",
      CHAIN_RPC_URL: chain.rpcUrl,
      CHAIN_ID: String(chain.chainId),
      USDC_ADDRESS: getAddress(chain.tokenAddress),
      PLATFORM_SIGNER_KEY: platformKey,
      CHAIN_CONFIRMATIONS: "1",
      // A killed worker's job is retaken within seconds, not the 30 s default.
      WORKER_LOCK_DURATION_MS: "2000",
      WORKER_STALLED_INTERVAL_MS: "1000",
      EXECUTE_SYNC_WAIT_MS: "2000",
      OUTBOX_SWEEP_INTERVAL_MS: "300",
      OUTBOX_STALE_AFTER_MS: "1000",
      OUTBOUND_ALLOWLIST: "127.0.0.1",
      HEALTH_PROBE_INTERVAL_MS: "0",
      KEYLESS_REQUESTS_PER_MINUTE: "1000000",
      PAYOUT_THRESHOLD_USDC: "0.2",
      PAYOUT_SWEEP_INTERVAL_MS: "1000",
      DEPOSIT_VERIFY_WAIT_MS: "0",
      SHUTDOWN_GRACE_MS: "2000",
      // Workers reach the first-party echo provider through a web process.
      FIRST_PARTY_BASE_URL: `http://127.0.0.1:${ports[0]}`,
      // The recovery sweeps of the executions and settlement workers, often.
      EXECUTIONS_RECOVERY_INTERVAL_MS: "2000",
      SETTLEMENT_RECOVERY_INTERVAL_MS: "2000",
    };
    stamp("cluster and chain");
    await runOnce("dist/shared/db/migrate-cli.js", ["latest"], env);
    const specs: ProcessSpec[] = [
      ...ports.map((port, i) => ({
        name: `web-${i + 1}`,
        kind: "web",
        script: "dist/api/main.js",
        args: [],
        env: { ...env, PORT: String(port) },
      })),
      ...["executions", "executions", "settlement-confirmations", "payouts"].map((queue, i) => ({
        name: `${queue}-${i + 1}`,
        kind: queue,
        script: "dist/workers/main.js",
        args: [queue],
        env,
      })),
    ];
    for (const spec of specs) supervisor.start(spec);
    db = knexFactory({ client: "pg", connection: cluster.postgres.url, pool: { min: 0, max: 4 } });
    executions = new Queue("executions", {
      connection: { url: cluster.redis.url } as never,
      prefix: queuePrefix,
    });
    stamp("migrations");
    const baseUrls = ports.map((p) => `http://127.0.0.1:${p}`);
    const client = new ChaosClient(baseUrls, random, clientRetryMs(profile));
    await untilHealthy(baseUrls, supervisor);

    stamp("processes healthy");
    sellers.push(await startChaosSeller(random, { answer: 85, hang: 5, reset: 5, garbage: 5 }));
    sellers.push(await startChaosSeller(random, { answer: 40, hang: 20, reset: 20, garbage: 20 }));
    const world: World = await buildWorld({
      client,
      chain,
      db,
      sellerUrls: { good: sellers[0]!.url, flaky: sellers[1]!.url },
      buyers: 6,
      x402Payers: 4,
    });
    stamp("world");
    const load = new Load(client, chain, world, random, platform);
    await load.fundBuyers();
    stamp("deposits sent");
    const funded = await drain(db, 30_000, log);
    if (Object.keys(funded).length)
      throw new Error(`the initial deposits did not settle: ${JSON.stringify(funded)}`);
    const setupSeconds = (Date.now() - t0) / 1000;
    log(`setup: ${JSON.stringify(stamps())}`);
    log(`setup done in ${setupSeconds.toFixed(0)} s; load and faults for ${profile.seconds} s`);

    const t1 = Date.now();
    const until = t1 + profile.seconds * 1000;
    let started = 0;
    let faultsDone = false;
    const clients = Array.from({ length: profile.clients }, async () => {
      // The load lasts as long as the faults (kills still due at the end are delivered a little after it).
      while ((Date.now() < until || !faultsDone) && started < profile.maxOperations) {
        started += 1;
        await load.runOne(random.weighted(OP_WEIGHTS)).catch((error: unknown) => {
          log(`load: an operation threw: ${String(error)}`);
        });
      }
    });
    const faults = await injectFaults({
      supervisor,
      cluster,
      random,
      until,
      kills: profile.kills,
      minUpMs: profile.minUpMs,
      log,
    });
    faultsDone = true;
    for (const s of sellers) s.behave();
    await Promise.all(clients);
    const loadSeconds = (Date.now() - t1) / 1000;
    log(`load done: ${load.records.length} operations in ${loadSeconds.toFixed(0)} s; draining`);

    const t2 = Date.now();
    const stillOpen = await drain(db, profile.drainSeconds * 1000, log);
    const drainSeconds = (Date.now() - t2) / 1000;
    const findings: Findings = {
      lost: await findLost(db, load.records),
      doubleCharges: await findDoubleCharges(db, chain, world, X402_START_MICROS),
      doublePayouts: await findDoublePayouts(db, chain, world, platform),
      violations: await runInvariants(db, executions),
    };
    const payouts: Record<string, number> = {};
    for (const row of await db("payouts").groupBy("status").select("status", db.raw("count(*)::int as n")))
      payouts[row.status] = row.n;
    const seller: Record<SellerBehaviour, number> = { answer: 0, hang: 0, reset: 0, garbage: 0 };
    for (const s of sellers)
      for (const k of Object.keys(seller) as SellerBehaviour[]) seller[k] += s.served[k];
    return {
      profile,
      faults: { ...faults, seller },
      operations: load.records,
      payouts,
      findings,
      stillOpen,
      unexpectedExits: supervisor.unexpectedExits(),
      seconds: { setup: setupSeconds, load: loadSeconds, drain: drainSeconds },
    };
  } catch (error) {
    log(supervisor.allOutput());
    throw error;
  } finally {
    await supervisor.stopAll();
    for (const s of sellers) await s.close().catch(() => {});
    await executions?.close().catch(() => {});
    await db?.destroy().catch(() => {});
    await chain?.stop().catch(() => {});
    await cluster?.stop();
  }
}

async function untilHealthy(baseUrls: string[], supervisor: Supervisor): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await Promise.all(
      baseUrls.map((u) =>
        fetch(`${u}/api/health`, { signal: AbortSignal.timeout(2000) })
          .then((r) => r.status === 200)
          .catch(() => false),
      ),
    );
    if (ok.every(Boolean)) return;
    if (Date.now() > deadline)
      throw new Error(`the web processes did not become healthy:\n${supervisor.allOutput()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
