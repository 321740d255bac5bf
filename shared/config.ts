import { createPrivateKey } from "node:crypto";
import { getAddress, isAddress } from "viem";
import { concurrencyVariable, QUEUE_NAMES, type QueueName } from "./queue-names.js";

/**
 * The only reader of process.env. Parsed once, validated, frozen. docs/configuration.md is generated
 * from SETTINGS below (`npm run docs`; a test fails when it is stale). Over 400 lines on purpose: the
 * settings table is data, one entry per variable with its parser and description, and keeping it in
 * one file keeps every setting in one place.
 */
export interface Config {
  port: number;
  host: string;
  publicBaseUrl: string;
  firstPartyBaseUrl: string;
  platformId: string;
  databaseUrl: string | undefined;
  databasePoolMax: number;
  redisUrl: string | undefined;
  redisCluster: boolean;
  queuePrefix: string;
  logLevel: string;
  logContext: boolean;
  executeSyncWaitMs: number;
  executeInProcess: boolean;
  queueConcurrency: Readonly<Record<QueueName, number>>;
  workerLockDurationMs: number;
  workerStalledIntervalMs: number;
  outboxSweepIntervalMs: number;
  outboxStaleAfterMs: number;
  idempotencyRetentionHours: number;
  providerResponseMaxBytes: number;
  requestBodyMaxBytes: number;
  requestJsonMaxDepth: number;
  httpHeadersTimeoutMs: number;
  httpRequestTimeoutMs: number;
  embeddedDataDir: string;
  shutdownGraceMs: number;
  validateResponses: boolean;
  outboundAllowlist: readonly string[];
  featuredPerSeller: number;
  catalogSearchMatchCap: number;
  catalogPageCacheSize: number;
  catalogRecordCacheSize: number;
  platformSigningKey: string | undefined;
  healthProbeIntervalMs: number;
  healthProbeJitterMs: number;
  healthProbeTimeoutMs: number;
  healthProbeFailuresToFail: number;
  circuitFailureThreshold: number;
  circuitCooldownMs: number;
  rankingStatsTtlMs: number;
  apiKeyCacheSize: number;
  cacheFreshnessMs: number;
  chainRpcUrl: string | undefined;
  chainId: number;
  chainName: string;
  chainExplorerUrl: string;
  usdcAddress: `0x${string}`;
  platformSignerKey: `0x${string}` | undefined;
  platformAddress: `0x${string}` | undefined;
  chainConfirmations: number;
  depositVerifyWaitMs: number;
  chainRpcTimeoutMs: number;
  chainCheckCacheMs: number;
  adminApiKey: string | undefined;
  devChain: boolean;
  devChainPort: number;
  x402QuoteTtlSeconds: number;
  x402SettlementWaitMs: number;
  tumblerFaucetMicros: bigint;
  tumblerQuoteTtlSeconds: number;
  keyRotationGraceSeconds: number;
  approvalTtlSeconds: number;
  approvalSweepIntervalMs: number;
  payoutThresholdMicros: bigint;
  payoutSweepIntervalMs: number;
  payoutPauseAfterSignMs: number;
  executionsRecoveryIntervalMs: number;
  settlementRecoveryIntervalMs: number;
  keylessRequestsPerMinute: number;
  discoveryCacheSeconds: number;
  verificationMonitoringScheduler: boolean;
  verificationMinIntervalSeconds: number;
  attestationTtlSeconds: number;
  verificationProbeTimeoutMs: number;
  verificationProbeMaxBytes: number;
  scrapeProvider: "builtin" | "firecrawl" | "off";
  firecrawlBaseUrl: string;
  firecrawlApiKey: string | undefined;
  scrapeTimeoutMs: number;
  scrapeMaxBytes: number;
  searchProvider: "searxng" | "brave" | "off";
  searxngBaseUrl: string | undefined;
  braveBaseUrl: string;
  braveApiKey: string | undefined;
  searchTimeoutMs: number;
  researchBaseUrl: string | undefined;
  researchModel: string | undefined;
  researchApiKey: string | undefined;
  researchStructuredOutput: "json_schema" | "json_object";
  researchTokenParam: "max_tokens" | "max_completion_tokens";
  researchMaxTokens: number;
  researchTimeoutMs: number;
  parseDeadlineMs: number;
  parseMaxMemoryMb: number;
  metricsToken: string | undefined;
  workerMetricsPort: number;
  queueMetricsCacheMs: number;
  adminQueueRetries: boolean;
  redisEvictionCheck: boolean;
  otelExporterOtlpEndpoint: string | undefined;
}

type Env = Record<string, string | undefined>;

interface Setting<T> {
  name: string;
  default: T | undefined;
  parse(raw: string): T;
  describe: string;
}

function int(
  name: string,
  def: number | undefined,
  describe: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): number {
      if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a whole number, got "${raw}"`);
      const value = Number(raw);
      if (value < min || value > max)
        throw new Error(`${name} must be between ${min} and ${max}, got ${value}`);
      return value;
    },
  } satisfies Setting<number>;
}

function str(name: string, def: string | undefined, describe: string, pattern?: RegExp) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): string {
      if (pattern && !pattern.test(raw)) throw new Error(`${name} must match ${pattern}, got "${raw}"`);
      return raw;
    },
  } satisfies Setting<string>;
}

function url(name: string, def: string | undefined, describe: string, protocols: string[]) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): string {
      let parsed: URL;
      try {
        parsed = new URL(raw);
      } catch {
        throw new Error(`${name} must be a URL, got "${raw}"`);
      }
      if (!protocols.includes(parsed.protocol)) {
        throw new Error(`${name} must use ${protocols.join(" or ")}, got "${parsed.protocol}"`);
      }
      return raw.replace(/\/$/, "");
    },
  } satisfies Setting<string>;
}

function list(name: string, describe: string, pattern: RegExp) {
  return {
    name,
    default: [] as readonly string[],
    describe,
    parse(raw: string): readonly string[] {
      const items = raw
        .split(",")
        .map((item) => item.trim().toLowerCase())
        .filter((item) => item.length > 0);
      const bad = items.filter((item) => !pattern.test(item));
      if (bad.length > 0) throw new Error(`${name} has invalid entries: ${bad.join(", ")}`);
      return Object.freeze(items);
    },
  } satisfies Setting<readonly string[]>;
}

function bool(name: string, def: boolean, describe: string) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): boolean {
      if (["1", "true", "yes"].includes(raw)) return true;
      if (["0", "false", "no"].includes(raw)) return false;
      throw new Error(`${name} must be true or false, got "${raw}"`);
    },
  } satisfies Setting<boolean>;
}

/** An Ed25519 private key, PKCS#8 DER in base64url; a bad value is reported without echoing the secret. */
function ed25519Key(name: string, describe: string) {
  return {
    name,
    default: undefined,
    describe,
    parse(raw: string): string {
      let type: string | undefined;
      try {
        type = createPrivateKey({
          key: Buffer.from(raw, "base64url"),
          format: "der",
          type: "pkcs8",
        }).asymmetricKeyType;
      } catch {
        type = undefined;
      }
      if (type !== "ed25519" || !/^[A-Za-z0-9_-]+$/.test(raw)) {
        throw new Error(`${name} must be an Ed25519 private key as PKCS#8 DER in base64url`);
      }
      return raw;
    },
  } satisfies Setting<string>;
}

/** An EVM address: 0x and 40 hex digits; mixed case must carry a valid EIP-55 checksum. */
function address(name: string, def: `0x${string}` | undefined, describe: string) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): `0x${string}` {
      if (!isAddress(raw, { strict: true })) throw new Error(`${name} must be a checksummed EVM address`);
      return getAddress(raw);
    },
  } satisfies Setting<`0x${string}`>;
}

/** A secp256k1 private key as 0x and 64 hex digits; a bad value is reported without echoing it. */
function evmPrivateKey(name: string, describe: string) {
  return {
    name,
    default: undefined,
    describe,
    parse(raw: string): `0x${string}` {
      if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) throw new Error(`${name} must be 0x followed by 64 hex digits`);
      return raw.toLowerCase() as `0x${string}`;
    },
  } satisfies Setting<`0x${string}`>;
}

/** A shared secret: long enough that guessing is hopeless; never echoed. */
function secret(name: string, describe: string, minLength: number) {
  return {
    name,
    default: undefined,
    describe,
    parse(raw: string): string {
      if (raw.length < minLength || /\s/.test(raw))
        throw new Error(`${name} must be at least ${minLength} characters without spaces`);
      return raw;
    },
  } satisfies Setting<string>;
}

/** An amount of (t)USDC as a decimal with at most 6 places, held as micro-units; within (0, max]. */
function microAmount(name: string, def: bigint, describe: string, maxMicros: bigint) {
  return {
    name,
    default: def,
    describe,
    parse(raw: string): bigint {
      const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(raw);
      if (!match) throw new Error(`${name} must be an amount with at most 6 decimals, got "${raw}"`);
      const micros = BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0"));
      if (micros <= 0n || micros > maxMicros)
        throw new Error(`${name} must be more than 0 and at most ${maxMicros / 1_000_000n}, got ${raw}`);
      return micros;
    },
  } satisfies Setting<bigint>;
}

/** A scheduler interval: 0 turns it off; otherwise at least a second (a tighter loop is a mistake). */
function intervalOrOff(name: string, def: number, describe: string) {
  const base = int(name, def, describe, 0);
  return {
    ...base,
    parse(raw: string): number {
      const value = base.parse(raw);
      if (value !== 0 && value < 1000)
        throw new Error(`${name} must be 0 (off) or at least 1000, got ${value}`);
      return value;
    },
  } satisfies Setting<number>;
}

/** One of a fixed set of words. */
function oneOf<const T extends string>(name: string, def: T, values: readonly T[], describe: string) {
  return {
    name,
    default: def,
    describe: `${describe} (one of ${values.join(", ")})`,
    parse(raw: string): T {
      const value = raw.trim().toLowerCase() as T;
      if (!values.includes(value))
        throw new Error(`${name} must be one of ${values.join(", ")}, got "${raw}"`);
      return value;
    },
  } satisfies Setting<T>;
}

/** A provider credential: never echoed, in errors or anywhere else. */
function credential(name: string, describe: string) {
  return {
    name,
    default: undefined,
    describe,
    parse(raw: string): string {
      if (/\s/.test(raw.trim()) || raw.trim() === "") throw new Error(`${name} must not contain spaces`);
      return raw.trim();
    },
  } satisfies Setting<string>;
}

const HTTP = ["http:", "https:"];

/** Every environment variable the service reads, with its default. Exported for docs/configuration.md (scripts/reference-docs.ts). */
export const SETTINGS = {
  port: int("PORT", 3000, "HTTP port of the API", 0, 65535),
  host: str("HOST", "0.0.0.0", "interface the API binds to"),
  publicBaseUrl: url(
    "PUBLIC_BASE_URL",
    undefined,
    "absolute base of links in responses (default http://localhost:$PORT)",
    HTTP,
  ),
  firstPartyBaseUrl: url(
    "FIRST_PARTY_BASE_URL",
    undefined,
    "where workers reach first-party providers such as echo (default http://127.0.0.1:$PORT)",
    HTTP,
  ),
  platformId: str(
    "PLATFORM_ID",
    "agentmarket",
    "fills <platform> in schema and tool names",
    /^[a-z][a-z0-9_]{1,31}$/,
  ),
  databaseUrl: url(
    "DATABASE_URL",
    undefined,
    "PostgreSQL (?host=/var/run/postgresql for a server's Unix socket on this machine); unset under npm start → embedded PostgreSQL",
    ["postgres:", "postgresql:"],
  ),
  databasePoolMax: int("DATABASE_POOL_MAX", 10, "PostgreSQL connections per process", 1, 500),
  redisUrl: url("REDIS_URL", undefined, "Redis; unset under npm start → a local redis-server child", [
    "redis:",
    "rediss:",
  ]),
  redisCluster: bool(
    "REDIS_CLUSTER",
    false,
    "REDIS_URL names one node of a Redis Cluster (ioredis discovers the others; the URL's credentials and TLS apply to all); QUEUE_PREFIX must then contain a hash tag",
  ),
  queuePrefix: str(
    "QUEUE_PREFIX",
    "{agentmarket}",
    "BullMQ key prefix (braces = Redis Cluster hash tag)",
    /^[^:\s]+$/,
  ),
  logLevel: str("LOG_LEVEL", "info", "pino level", /^(fatal|error|warn|info|debug|trace|silent)$/),
  logContext: bool(
    "LOG_CONTEXT",
    false,
    "every log line written while serving a request or job carries its request_id (a job's also job_id and queue), through Node's AsyncLocalStorage, whose promise hooks cost about a sixth of an execute's CPU on Node 20; always on while tracing is on (docs/operations.md \"Traces and request ids\")",
  ),
  executeSyncWaitMs: int(
    "EXECUTE_SYNC_WAIT_MS",
    10000,
    "how long POST /api/execute waits before answering 202",
    0,
    60000,
  ),
  executeInProcess: bool(
    "EXECUTE_IN_PROCESS",
    true,
    "in a process hosting both the API and the executions worker (npm start), run an execution in the request that submitted it instead of through the queue (docs/architecture.md); only while `EXECUTIONS_RECOVERY_INTERVAL_MS` is above 0, since that sweep is what finishes such a run if the process dies",
  ),
  workerLockDurationMs: int(
    "WORKER_LOCK_DURATION_MS",
    30000,
    "BullMQ job lock; a dead worker's job is retaken after it",
    1000,
  ),
  workerStalledIntervalMs: int(
    "WORKER_STALLED_INTERVAL_MS",
    30000,
    "how often workers look for stalled jobs",
    500,
  ),
  outboxSweepIntervalMs: int(
    "OUTBOX_SWEEP_INTERVAL_MS",
    2000,
    "how often the sweeper re-enqueues unsent jobs",
    100,
  ),
  outboxStaleAfterMs: int(
    "OUTBOX_STALE_AFTER_MS",
    5000,
    "age after which an unsent outbox row is re-enqueued",
    0,
  ),
  idempotencyRetentionHours: int(
    "IDEMPOTENCY_RETENTION_HOURS",
    24,
    "how long idempotency keys are kept",
    1,
    24 * 30,
  ),
  providerResponseMaxBytes: int(
    "PROVIDER_RESPONSE_MAX_BYTES",
    1048576,
    "largest provider response accepted",
    1024,
  ),
  requestBodyMaxBytes: int("REQUEST_BODY_MAX_BYTES", 2097152, "largest JSON request body accepted", 1024),
  requestJsonMaxDepth: int(
    "REQUEST_JSON_MAX_DEPTH",
    64,
    "deepest nesting of arrays and objects accepted in a JSON request body",
    2,
    1000,
  ),
  httpHeadersTimeoutMs: int(
    "HTTP_HEADERS_TIMEOUT_MS",
    10000,
    "how long a client may take to send its request headers before the connection is closed (slow clients)",
    100,
  ),
  httpRequestTimeoutMs: int(
    "HTTP_REQUEST_TIMEOUT_MS",
    30000,
    "how long a client may take to send its whole request, body included, before it is answered 408",
    100,
  ),
  embeddedDataDir: str("EMBEDDED_DATA_DIR", ".data", "where npm start keeps embedded PostgreSQL data"),
  shutdownGraceMs: int(
    "SHUTDOWN_GRACE_MS",
    8000,
    "how long a process drains on SIGTERM before exiting (under the 10 s a stop may take)",
    0,
  ),
  validateResponses: bool(
    "VALIDATE_RESPONSES",
    false,
    "check every response against its declared schema (tests)",
  ),
  outboundAllowlist: list(
    "OUTBOUND_ALLOWLIST",
    "hosts exempt from the public-address rule for seller endpoints (tests, local development); empty by default",
    /^[a-z0-9.:[\]-]+$/,
  ),
  featuredPerSeller: int(
    "FEATURED_PER_SELLER",
    3,
    "most listings of one seller in the featured lane",
    1,
    100,
  ),
  catalogSearchMatchCap: int(
    "CATALOG_SEARCH_MATCH_CAP",
    1000,
    'most listings a catalog search ranks and counts; past it `total` is this number with `total_relation` "gte"',
    20,
    1_000_000,
  ),
  catalogPageCacheSize: int(
    "CATALOG_PAGE_CACHE_SIZE",
    1000,
    "catalog pages each process keeps (their listing ids and total), proved current by the catalog generation before use; 0 keeps none",
    0,
    100_000,
  ),
  catalogRecordCacheSize: int(
    "CATALOG_RECORD_CACHE_SIZE",
    1000,
    "listing records each process keeps as JSON for catalog pages (~28 KB each), proved current by their facts before use; 0 keeps none",
    0,
    100_000,
  ),
  platformSigningKey: ed25519Key(
    "PLATFORM_SIGNING_KEY",
    "Ed25519 key that signs calls to sellers; unset → one key generated and kept in the database",
  ),
  healthProbeIntervalMs: intervalOrOff(
    "HEALTH_PROBE_INTERVAL_MS",
    300000,
    "how often every active listing is probed (the probe-sweep scheduler); 0 disables it",
  ),
  healthProbeJitterMs: int(
    "HEALTH_PROBE_JITTER_MS",
    30000,
    "each sweep spreads its probes over a random delay up to this",
    0,
  ),
  healthProbeTimeoutMs: int(
    "HEALTH_PROBE_TIMEOUT_MS",
    5000,
    "a probe not answered within this fails",
    100,
    30000,
  ),
  healthProbeFailuresToFail: int(
    "HEALTH_PROBE_FAILURES_TO_FAIL",
    3,
    "consecutive failed probes that make verification_status failed",
    1,
    100,
  ),
  circuitFailureThreshold: int(
    "CIRCUIT_FAILURE_THRESHOLD",
    5,
    "consecutive failed calls or probes that open a listing's circuit",
    1,
    1000,
  ),
  circuitCooldownMs: int(
    "CIRCUIT_COOLDOWN_MS",
    30000,
    "how long an open circuit refuses calls before one trial call",
    1,
    24 * 3600 * 1000,
  ),
  rankingStatsTtlMs: int(
    "RANKING_STATS_TTL_MS",
    1000,
    'how long a process reuses a listing\'s recent-call statistics for ranking, and, for the listings it keeps, the circuit states it last saw (0 reads both on every execute); the call gate always checks the circuit live (docs/architecture.md "Caches that are proved")',
    0,
    60_000,
  ),
  apiKeyCacheSize: int(
    "API_KEY_CACHE_SIZE",
    10_000,
    'API keys each API process keeps resolved in memory (0 reads the key row on every request); a revocation or rotation still binds in every process before its request answers (docs/architecture.md "Caches that are told"); off on a Redis Cluster',
    0,
    1_000_000,
  ),
  cacheFreshnessMs: int(
    "CACHE_FRESHNESS_MS",
    250,
    "how long a pong on the invalidation channel lets a process answer from its caches, and how long a revocation or rotation waits before it answers",
    30,
    5_000,
  ),
  chainRpcUrl: url(
    "CHAIN_RPC_URL",
    undefined,
    "JSON-RPC of the settlement chain; unset → no rail, paid execution stays off (platform_custody_frozen)",
    HTTP,
  ),
  chainId: int("CHAIN_ID", 8453, "EVM chain id of the settlement chain (8453 = Base)", 1),
  chainName: str("CHAIN_NAME", "Base", "human name of the settlement chain"),
  chainExplorerUrl: url("CHAIN_EXPLORER_URL", "https://basescan.org", "block explorer of the chain", HTTP),
  usdcAddress: address(
    "USDC_ADDRESS",
    "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    "USDC token contract (EIP-3009) on the settlement chain",
  ),
  platformSignerKey: evmPrivateKey(
    "PLATFORM_SIGNER_KEY",
    "platform hot key that submits settlements and payouts; unset → paid execution stays off",
  ),
  platformAddress: address(
    "PLATFORM_ADDRESS",
    undefined,
    "where deposits and x402 payments are paid (default: the signer's address)",
  ),
  chainConfirmations: int(
    "CHAIN_CONFIRMATIONS",
    3,
    "blocks (including the transaction's own) before a deposit or payout counts",
    1,
    1000,
  ),
  depositVerifyWaitMs: int(
    "DEPOSIT_VERIFY_WAIT_MS",
    5000,
    "how long POST /api/wallet/purchase/verify reads the chain before answering (0 = leave it to the worker)",
    0,
    60000,
  ),
  chainRpcTimeoutMs: int("CHAIN_RPC_TIMEOUT_MS", 3000, "timeout of one JSON-RPC request", 100, 60000),
  chainCheckCacheMs: int(
    "CHAIN_CHECK_CACHE_MS",
    1000,
    "how long one live RPC check serves the gate, and a paid call may rank on its process's last open custody reading (0 = read both on every call)",
    0,
    60000,
  ),
  adminApiKey: secret(
    "ADMIN_API_KEY",
    "bearer secret of the operator API (/api/admin/*); unset → the admin API answers 404",
    32,
  ),
  devChain: bool(
    "DEV_CHAIN",
    false,
    "npm start only: run a local EVM with the test token and enable paid execution on it",
  ),
  devChainPort: int(
    "DEV_CHAIN_PORT",
    8545,
    "port of the DEV_CHAIN JSON-RPC on 127.0.0.1 (0 = any)",
    0,
    65535,
  ),
  x402QuoteTtlSeconds: int(
    "X402_QUOTE_TTL_SECONDS",
    300,
    "how long an x402 quote (GET /api/x402/execute/match, or a challenge of POST /api/x402/invoke) can be paid",
    30,
    3600,
  ),
  x402SettlementWaitMs: int(
    "X402_SETTLEMENT_WAIT_MS",
    5000,
    "how long a paid x402 answer waits for its on-chain settlement before reporting what has evidence",
    0,
    60000,
  ),
  tumblerFaucetMicros: microAmount(
    "TUMBLER_FAUCET_USDC",
    10_000_000n,
    "the sandbox faucet tops an agent's available tUSDC up to this, at most once per UTC day",
    1_000_000_000_000n,
  ),
  tumblerQuoteTtlSeconds: int(
    "TUMBLER_QUOTE_TTL_SECONDS",
    300,
    "how long a sandbox quote (GET /api/tumbler/execute/match) can be executed",
    10,
    3600,
  ),
  keyRotationGraceSeconds: int(
    "KEY_ROTATION_GRACE_SECONDS",
    3600,
    "how long a rotated API key's previous secret keeps working (a rotate request may ask for less)",
    0,
    7 * 24 * 3600,
  ),
  approvalTtlSeconds: int(
    "APPROVAL_TTL_SECONDS",
    86400,
    "how long a purchase awaits a supervisor's decision before its hold is released",
    1,
    30 * 24 * 3600,
  ),
  approvalSweepIntervalMs: int(
    "APPROVAL_SWEEP_INTERVAL_MS",
    5000,
    "how often each web process releases approvals past their expiry",
    100,
    3600 * 1000,
  ),
  payoutThresholdMicros: microAmount(
    "PAYOUT_THRESHOLD_USDC",
    10_000_000n,
    "a seller's payable USDC is paid out once it reaches this (one on-chain transfer per seller per sweep)",
    1_000_000_000_000n,
  ),
  payoutSweepIntervalMs: intervalOrOff(
    "PAYOUT_SWEEP_INTERVAL_MS",
    900000,
    "how often the payouts worker batches payable balances into payouts (the payout-sweep scheduler); 0 disables it",
  ),
  executionsRecoveryIntervalMs: intervalOrOff(
    "EXECUTIONS_RECOVERY_INTERVAL_MS",
    30000,
    "how often each executions worker ends invocations whose job the queue gave up on (or lost) without ending them, and sends a job for a run here whose process died; most passes read the last 15 minutes of invocations, every twentieth all of them (docs/reliability.md); 0 disables it (and running executions in the submitting request)",
  ),
  settlementRecoveryIntervalMs: intervalOrOff(
    "SETTLEMENT_RECOVERY_INTERVAL_MS",
    30000,
    "how often each settlement-confirmations worker re-drives x402 settlements and deposits whose job the queue gave up on (or lost); 0 disables it",
  ),
  payoutPauseAfterSignMs: int(
    "PAYOUT_PAUSE_AFTER_SIGN_MS",
    0,
    "fault injection for tests: the payouts worker waits this long after recording a signed payout, before broadcasting it; keep 0",
    0,
    600000,
  ),
  keylessRequestsPerMinute: int(
    "KEYLESS_REQUESTS_PER_MINUTE",
    120,
    "per client IP and route, for keyless routes that write rows (registration, x402 quotes and challenges)",
    1,
    1_000_000,
  ),
  discoveryCacheSeconds: int(
    "DISCOVERY_CACHE_SECONDS",
    30,
    "how long the discovery documents (llms.txt, agent card, index…) are served from one snapshot, whose hashes /api/index.json lists",
    1,
    3600,
  ),
  verificationMonitoringScheduler: bool(
    "VERIFICATION_MONITORING_SCHEDULER",
    false,
    "run monitoring subscriptions on BullMQ job schedulers (each run a separate 5 USDC charge); off → subscriptions are recorded but never run on their own",
  ),
  verificationMinIntervalSeconds: int(
    "VERIFICATION_MIN_INTERVAL_SECONDS",
    3600,
    "the shortest monitoring interval a subscription may ask for (tests lower it)",
    1,
    30 * 24 * 3600,
  ),
  // At most RETIRED_KEY_PUBLISH_DAYS (7 days): a retired key stays in the JWKS that long, so every
  // attestation it signed stays verifiable until it expires (docs/verification.md "Key rotation").
  attestationTtlSeconds: int(
    "ATTESTATION_TTL_SECONDS",
    7 * 24 * 3600,
    "how long a verification attestation is valid after its probe (at most 7 days, the retired-key publication window)",
    60,
    7 * 24 * 3600,
  ),
  verificationProbeTimeoutMs: int(
    "VERIFICATION_PROBE_TIMEOUT_MS",
    10000,
    "budget of one verification probe request (each MCP request, the x402 challenge, the http-json call)",
    100,
    30000,
  ),
  verificationProbeMaxBytes: int(
    "VERIFICATION_PROBE_MAX_BYTES",
    1_000_000,
    "largest response body a verification probe reads",
    1024,
    10_000_000,
  ),
  // First-party tools (docs/tools.md). A provider-gated tool whose provider is not configured is unlisted.
  scrapeProvider: oneOf(
    "SCRAPE_PROVIDER",
    "builtin",
    ["builtin", "firecrawl", "off"],
    "who serves the page-scrape tool: the built-in fetch + Readability pipeline, a Firecrawl API, or nobody (the tool is unlisted)",
  ),
  firecrawlBaseUrl: url(
    "FIRECRAWL_BASE_URL",
    "https://api.firecrawl.dev",
    "base URL of the Firecrawl v2 API (self-hosted Firecrawl: its own URL) when SCRAPE_PROVIDER=firecrawl",
    HTTP,
  ),
  firecrawlApiKey: credential(
    "FIRECRAWL_API_KEY",
    "Firecrawl API key (fc-…), sent only to FIRECRAWL_BASE_URL; optional for a self-hosted Firecrawl",
  ),
  scrapeTimeoutMs: int(
    "SCRAPE_TIMEOUT_MS",
    20000,
    "time budget of one page scrape, every redirect included",
    1000,
    28000,
  ),
  scrapeMaxBytes: int(
    "SCRAPE_MAX_BYTES",
    5242880,
    "largest page the built-in scraper downloads (bytes)",
    65536,
    52428800,
  ),
  searchProvider: oneOf(
    "SEARCH_PROVIDER",
    "off",
    ["searxng", "brave", "off"],
    "who serves the web-search tool: a SearXNG instance (JSON API), the Brave Search API, or nobody (the tool is unlisted)",
  ),
  searxngBaseUrl: url(
    "SEARXNG_BASE_URL",
    undefined,
    "base URL of the SearXNG instance when SEARCH_PROVIDER=searxng (its settings.yml must list json under search.formats)",
    HTTP,
  ),
  braveBaseUrl: url(
    "BRAVE_BASE_URL",
    "https://api.search.brave.com",
    "base URL of the Brave Search API when SEARCH_PROVIDER=brave",
    HTTP,
  ),
  braveApiKey: credential(
    "BRAVE_API_KEY",
    "Brave Search API subscription token, required when SEARCH_PROVIDER=brave",
  ),
  searchTimeoutMs: int("SEARCH_TIMEOUT_MS", 10000, "time budget of one web search", 1000, 28000),
  researchBaseUrl: url(
    "RESEARCH_BASE_URL",
    undefined,
    "base URL of an OpenAI-compatible API for the research brief, without /v1 (OpenAI, Ollama, vLLM, LiteLLM…); unset = the tool is unlisted",
    HTTP,
  ),
  researchModel: str("RESEARCH_MODEL", undefined, "model name sent to RESEARCH_BASE_URL; required with it"),
  researchApiKey: credential(
    "RESEARCH_API_KEY",
    "bearer key sent only to RESEARCH_BASE_URL (optional: a local Ollama ignores it)",
  ),
  researchStructuredOutput: oneOf(
    "RESEARCH_STRUCTURED_OUTPUT",
    "json_schema",
    ["json_schema", "json_object"],
    "how the brief's JSON is requested: response_format json_schema (strict), or json_object with the schema in the prompt for backends without JSON-Schema output",
  ),
  researchTokenParam: oneOf(
    "RESEARCH_TOKEN_PARAM",
    "max_tokens",
    ["max_tokens", "max_completion_tokens"],
    "the request field that bounds the answer's tokens (OpenAI reasoning models want max_completion_tokens)",
  ),
  researchMaxTokens: int("RESEARCH_MAX_TOKENS", 1500, "most tokens the model may answer with", 256, 16000),
  researchTimeoutMs: int(
    "RESEARCH_TIMEOUT_MS",
    25000,
    "time budget of one research brief, retry included",
    1000,
    28000,
  ),
  parseDeadlineMs: int(
    "PARSE_DEADLINE_MS",
    5000,
    "hard deadline of one document parse; its worker thread is terminated past it",
    100,
    25000,
  ),
  parseMaxMemoryMb: int(
    "PARSE_MAX_MEMORY_MB",
    128,
    "heap limit (old generation, MB) of the worker thread a document parse runs in",
    32,
    2048,
  ),
  metricsToken: secret(
    "METRICS_TOKEN",
    "bearer token a scraper must send to /metrics (web) and to each worker's metrics port; unset → /metrics is open (keep it on a private network)",
    16,
  ),
  workerMetricsPort: int(
    "WORKER_METRICS_PORT",
    0,
    "port on which a worker process serves its own /metrics (0 = off); one port per process, so give each copy its own",
    0,
    65535,
  ),
  queueMetricsCacheMs: int(
    "QUEUE_METRICS_CACHE_MS",
    5000,
    "how long one read of the queues' job counts serves /metrics scrapes",
    0,
    600000,
  ),
  adminQueueRetries: bool(
    "ADMIN_QUEUE_RETRIES",
    false,
    "lets the admin queue dashboard (/admin/queues) retry failed jobs; off → read-only",
  ),
  redisEvictionCheck: bool(
    "REDIS_EVICTION_CHECK",
    true,
    "on start, refuse (exit 1) a Redis whose maxmemory-policy is not noeviction: BullMQ loses jobs when Redis evicts keys",
  ),
  otelExporterOtlpEndpoint: url(
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    undefined,
    "OTLP/HTTP collector base URL (traces go to <url>/v1/traces); unset → tracing off",
    HTTP,
  ),
} as const;

/** Per-queue worker concurrency settings, one variable per queue. */
export const CONCURRENCY_SETTINGS = Object.fromEntries(
  QUEUE_NAMES.map((queue) => [
    queue,
    int(
      concurrencyVariable(queue),
      queue === "executions" ? 32 : 4,
      `jobs one ${queue} worker runs at once`,
      1,
      1000,
    ),
  ]),
) as Record<QueueName, Setting<number>>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
  }
}

function read<T>(env: Env, setting: Setting<T>, problems: string[]): T | undefined {
  const raw = env[setting.name];
  if (raw === undefined || raw === "") return setting.default;
  try {
    return setting.parse(raw);
  } catch (error) {
    problems.push((error as Error).message);
    return setting.default;
  }
}

/**
 * True when Redis Cluster hashes every key that starts with `prefix` by one tag, so they share a slot.
 * Redis's own rule: the tag is what lies between the first `{` and the next `}`, when not empty.
 */
export function hasHashTag(prefix: string): boolean {
  const open = prefix.indexOf("{");
  return open >= 0 && prefix.indexOf("}", open + 1) > open + 1;
}

/**
 * What REDIS_CLUSTER asks of the other Redis settings. A cluster refuses a script or MULTI whose keys
 * sit in different slots (CROSSSLOT); BullMQ's scripts touch several keys of a queue at once, and so do
 * the breaker's and the limits' scripts, and every key the service writes starts with QUEUE_PREFIX: a
 * hash tag in it puts them all in one slot (docs/operations.md "Redis Cluster").
 */
function redisClusterProblems(c: Pick<Config, "redisUrl" | "redisCluster" | "queuePrefix">): string[] {
  if (!c.redisCluster) return [];
  const problems: string[] = [];
  if (!hasHashTag(c.queuePrefix))
    problems.push(
      `QUEUE_PREFIX must contain a Redis Cluster hash tag, such as {agentmarket}, when REDIS_CLUSTER is on, got "${c.queuePrefix}": without one BullMQ's keys fall into different slots and the cluster refuses its scripts (CROSSSLOT)`,
    );
  if (!c.redisUrl) problems.push("REDIS_CLUSTER needs REDIS_URL, the address of one node of the cluster");
  else if (!["", "/", "/0"].includes(new URL(c.redisUrl).pathname))
    problems.push(
      "REDIS_URL must not select a database when REDIS_CLUSTER is on: a cluster has database 0 only",
    );
  return problems;
}

/** Parses an environment into a Config; throws ConfigError listing every problem at once. */
export function parseConfig(env: Env): Config {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS))
    values[key] = read(env, setting as Setting<unknown>, problems);
  const queueConcurrency = Object.fromEntries(
    QUEUE_NAMES.map((queue) => [queue, read(env, CONCURRENCY_SETTINGS[queue], problems)]),
  ) as Record<QueueName, number>;
  problems.push(...redisClusterProblems(values as Pick<Config, "redisUrl" | "redisCluster" | "queuePrefix">));
  if (problems.length > 0) throw new ConfigError(problems);
  const port = values.port as number;
  return Object.freeze({
    ...(values as Omit<Config, "queueConcurrency">),
    publicBaseUrl: (values.publicBaseUrl as string | undefined) ?? `http://localhost:${port}`,
    firstPartyBaseUrl: (values.firstPartyBaseUrl as string | undefined) ?? `http://127.0.0.1:${port}`,
    queueConcurrency: Object.freeze(queueConcurrency),
  });
}

let current: Config | undefined;

/** The process-wide configuration, parsed from process.env on first use. */
export function getConfig(): Config {
  if (!current) current = parseConfig(process.env);
  return current;
}

/**
 * Replaces parts of the configuration before anything connects: the all-in-one launcher fills in the
 * embedded database and Redis URLs, tests point at their own port.
 */
export function overrideConfig(overrides: Partial<Config>): Config {
  current = Object.freeze({ ...getConfig(), ...overrides });
  return current;
}

/** Reads the config or prints every problem and exits 1: for process entry points. */
export function loadConfigOrExit(): Config {
  try {
    return getConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}
