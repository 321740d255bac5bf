import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig, parseConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { freePort } from "../../shared/infra/free-port.js";
import { evictionProblem } from "../../shared/infra/redis-policy.js";
import { closeCommandRedis, commandRedis } from "../../shared/redis.js";
import { createCircuitBreaker, recordCallOutcome } from "../../shared/routing/circuit-breaker.js";
import { circuitStateCounts } from "../../shared/routing/circuits.js";
import { api } from "../helpers/http.js";
import { startProcess, waitFor } from "../helpers/processes.js";
import { startService, type TestService } from "../helpers/service.js";

// The service on a Redis Cluster (docs/operations.md "Redis Cluster"): three redis-servers with
// cluster-enabled on loopback, started by this file, and the whole execute path on top of them: a
// registration (per-client limit), POST /api/execute through BullMQ (queue, worker, QueueEvents), the
// listing limits and the circuit breaker. Every key the service wrote must sit in the slot of
// QUEUE_PREFIX's hash tag; the same scripts over an untagged prefix are refused by the cluster.

const dir = mkdtempSync(join(tmpdir(), "am-redis-cluster-"));
const servers: ChildProcess[] = [];
const ports: number[] = [];
let seedUrl: string;
let service: TestService | undefined;
let admin: Cluster | undefined;

function stopServers(): void {
  for (const server of servers) if (server.exitCode === null) server.kill("SIGKILL");
}
// Also on a crash of this file's process: no redis-server outlives the run.
process.once("exit", stopServers);

async function clusterNode(): Promise<number> {
  const port = await freePort();
  // The bus port is given explicitly: port + 10000 (the default) may be taken or above 65535.
  const busPort = await freePort();
  const child = spawn(
    "redis-server",
    [
      ...["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      ...["--cluster-enabled", "yes", "--cluster-port", String(busPort)],
      ...["--cluster-config-file", `nodes-${port}.conf`, "--dir", dir],
      ...["--maxmemory-policy", "noeviction"],
    ],
    { stdio: "ignore" },
  );
  servers.push(child);
  await waitFor(`redis-server on ${port}`, async () => {
    const probe = new Redis(port, "127.0.0.1", {
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    probe.on("error", () => {});
    try {
      await probe.connect();
      return (await probe.ping()) === "PONG";
    } finally {
      probe.disconnect();
    }
  });
  return port;
}

async function clusterState(port: number): Promise<string | undefined> {
  const node = new Redis(port, "127.0.0.1", { lazyConnect: true, retryStrategy: () => null });
  node.on("error", () => {});
  try {
    await node.connect();
    return /^cluster_state:(\w+)/m.exec(await node.cluster("INFO"))?.[1];
  } finally {
    node.disconnect();
  }
}

/** The keys matching `pattern` on each node, read from the nodes themselves (not through the code under test). */
async function keysPerNode(pattern: string): Promise<string[][]> {
  return Promise.all(
    ports.map(async (port) => {
      const node = new Redis(port, "127.0.0.1");
      try {
        return await node.keys(pattern);
      } finally {
        node.disconnect();
      }
    }),
  );
}

beforeAll(async () => {
  ports.push(...(await Promise.all([clusterNode(), clusterNode(), clusterNode()])));
  const create = spawnSync(
    "redis-cli",
    [
      "--cluster",
      "create",
      ...ports.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ],
    { encoding: "utf8", timeout: 20_000 },
  );
  if (create.status !== 0)
    throw new Error(`redis-cli --cluster create failed:\n${create.stdout}${create.stderr}`);
  for (const port of ports)
    await waitFor(`cluster_state:ok on ${port}`, async () => (await clusterState(port)) === "ok");
  seedUrl = `redis://127.0.0.1:${ports[0]}`;
  // Through parseConfig, as a process would read it: REDIS_CLUSTER on, the file's hash-tagged prefix.
  overrideConfig(parseConfig({ ...process.env, REDIS_URL: seedUrl, REDIS_CLUSTER: "true" }));
  admin = new Cluster([{ host: "127.0.0.1", port: ports[1]! }]);
  await new Promise((resolve) => admin!.once("ready", resolve));
  // Through the queue (BullMQ on the cluster is what this file tests), not run in the request.
  service = await startService({ runHere: false });
}, 60_000);

afterAll(async () => {
  try {
    await service?.stop();
    await closeCommandRedis();
    admin?.disconnect();
  } finally {
    stopServers();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("the service on a three-node Redis Cluster", () => {
  it("talks to the cluster, not to a single Redis", async () => {
    expect(getConfig().redisCluster).toBe(true);
    expect(getConfig().queuePrefix).toMatch(/^\{amtest-[0-9a-f]{8}\}$/);
    expect(commandRedis()).toBeInstanceOf(Cluster);
    expect(service!.worker!.opts.connection).toBeInstanceOf(Cluster);
    const health = await api("GET", "/api/health");
    expect(health.status, health.text).toBe(200);
  });

  it("registers an agent and executes echo end to end, every key in the prefix's slot", async () => {
    const registered = await api("POST", "/api/quickstart", {
      body: { name: "cluster-buyer", intent: "buyer" },
    });
    expect(registered.status, registered.text).toBe(201);

    const res = await api("POST", "/api/execute", {
      key: registered.body.api_key,
      body: { task: "echo", input: { message: "over the cluster" } },
    });
    // 200, not 202: the answer came through the queue and the API's QueueEvents wait on the cluster.
    expect(res.status, res.text).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.output.echo).toEqual({ message: "over the cluster" });
    expect(res.body.receipt_id).toEqual(expect.any(String));
    const invocation = await db()("invocations").where({ id: res.body.invocation_id }).first();
    expect(invocation.status).toBe("succeeded");
    const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, {
      key: registered.body.api_key,
    });
    expect(receipt.status).toBe(200);

    // A failed call leaves a breaker key (a success deletes it); the gauge's SCAN finds it on the cluster.
    await recordCallOutcome(invocation.listing_id, false);
    expect((await circuitStateCounts()).closed).toBeGreaterThanOrEqual(1);

    const prefix = getConfig().queuePrefix;
    const perNode = await keysPerNode(`${prefix}*`);
    const keys = perNode.flat();
    expect(keys).toEqual(
      expect.arrayContaining([
        `${prefix}:executions:meta`,
        `${prefix}:executions:${res.body.invocation_id}`,
        `${prefix}:circuit:${invocation.listing_id}`,
        expect.stringMatching(new RegExp(`^\\{amtest-[0-9a-f]{8}\\}:limits:${invocation.listing_id}:rate:`)),
        expect.stringMatching(/:clients:post:\/api\/quickstart:.*:\d+$/),
      ]),
    );
    const slot = await admin!.cluster("KEYSLOT", prefix.slice(1, -1));
    for (const key of keys) expect(await admin!.cluster("KEYSLOT", key), key).toBe(slot);
    // One slot lives on one master: the other two hold none of the service's keys.
    expect(perNode.filter((k) => k.length > 0)).toHaveLength(1);
  });

  it("refuses the breaker's scripts over a prefix without a hash tag (CROSSSLOT), which config prevents", async () => {
    const untagged = createCircuitBreaker(commandRedis(), {
      prefix: "amtest-untagged",
      failureThreshold: 5,
      cooldownMs: 1000,
    });
    // Redis answers CROSSSLOT; with auto-pipelining ioredis refuses the same keys itself, before sending.
    await expect(untagged.allowCall("0b8e6f9e-5d0e-4a57-9a43-3a4a8f8c2c11")).rejects.toThrow(
      /CROSSSLOT|keys in a pipeline command should belong to the same slot/,
    );
    expect(() => parseConfig({ REDIS_URL: seedUrl, REDIS_CLUSTER: "true", QUEUE_PREFIX: "amtest" })).toThrow(
      /QUEUE_PREFIX must contain a Redis Cluster hash tag/,
    );
  });

  it("the start-up check reads every node's eviction policy and names the one that evicts", async () => {
    const env = { REDIS_URL: seedUrl, REDIS_CLUSTER: "true", LOG_LEVEL: "info" };
    expect(await evictionProblem(seedUrl, true)).toBeUndefined();
    const worker = startProcess("dist/workers/main.js", ["payouts"], env);
    try {
      await expect.poll(() => worker.output(), { timeout: 15_000 }).toContain("workers started");
    } finally {
      worker.child.kill("SIGTERM");
    }
    // Shutdown on a cluster is as clean as on one Redis: exit 0, no "Unhandled error event".
    expect(await worker.exited).toBe(0);
    expect(worker.output()).not.toMatch(/Unhandled error|"level":(50|60)/);

    const node = new Redis(ports[2]!, "127.0.0.1");
    try {
      await node.config("SET", "maxmemory-policy", "allkeys-lru");
      const refusal = new RegExp(
        `^refusing to start: Redis maxmemory-policy is allkeys-lru on cluster node 127\\.0\\.0\\.1:${ports[2]}, BullMQ needs noeviction`,
      );
      expect(await evictionProblem(seedUrl, true)).toMatch(refusal);
      const refused = startProcess("dist/workers/main.js", ["payouts"], env);
      expect(await refused.exited).toBe(1);
      expect(refused.output().trim()).toMatch(refusal);
    } finally {
      await node.config("SET", "maxmemory-policy", "noeviction");
      node.disconnect();
    }
  });
});
