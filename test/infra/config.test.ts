import { describe, expect, it } from "vitest";
import { CONCURRENCY_SETTINGS, ConfigError, hasHashTag, parseConfig } from "../../shared/config.js";
import { QUEUE_NAMES } from "../../shared/queue-names.js";

function configError(env: Record<string, string>): ConfigError {
  try {
    parseConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("parseConfig accepted an invalid environment");
}

describe("parseConfig defaults", () => {
  it("an empty environment gives PORT 3000 and base URLs derived from it", () => {
    const config = parseConfig({});
    expect(config.port).toBe(3000);
    expect(config.host).toBe("0.0.0.0");
    expect(config.publicBaseUrl).toBe("http://localhost:3000");
    expect(config.firstPartyBaseUrl).toBe("http://127.0.0.1:3000");
    expect(config.platformId).toBe("agentmarket");
    expect(config.databaseUrl).toBeUndefined();
    expect(config.redisUrl).toBeUndefined();
    expect(config.validateResponses).toBe(false);
  });

  it("derives both base URLs from a custom PORT", () => {
    const config = parseConfig({ PORT: "4123" });
    expect(config.port).toBe(4123);
    expect(config.publicBaseUrl).toBe("http://localhost:4123");
    expect(config.firstPartyBaseUrl).toBe("http://127.0.0.1:4123");
  });

  it("an explicit PUBLIC_BASE_URL wins over the derived one and loses its trailing slash", () => {
    const config = parseConfig({ PORT: "4123", PUBLIC_BASE_URL: "https://market.example.com/" });
    expect(config.publicBaseUrl).toBe("https://market.example.com");
    expect(config.firstPartyBaseUrl).toBe("http://127.0.0.1:4123");
  });

  it("treats an empty string as unset", () => {
    expect(parseConfig({ PORT: "", LOG_LEVEL: "" })).toMatchObject({ port: 3000, logLevel: "info" });
  });

  it("parses booleans and whole numbers", () => {
    const config = parseConfig({ VALIDATE_RESPONSES: "yes", DATABASE_POOL_MAX: "25" });
    expect(config.validateResponses).toBe(true);
    expect(config.databasePoolMax).toBe(25);
  });

  it("returns a frozen config", () => {
    const config = parseConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.queueConcurrency)).toBe(true);
  });
});

describe("parseConfig problems", () => {
  it("lists every invalid setting at once", () => {
    const error = configError({ PORT: "abc", DATABASE_URL: "mysql://db/x", LOG_LEVEL: "loud" });
    expect(error.problems).toHaveLength(3);
    expect(error.problems.some((p) => p.includes("PORT"))).toBe(true);
    expect(error.problems.some((p) => p.includes("DATABASE_URL"))).toBe(true);
    expect(error.problems.some((p) => p.includes("LOG_LEVEL"))).toBe(true);
    for (const problem of error.problems) expect(error.message).toContain(problem);
  });

  it.each([
    ["PORT", "65536"],
    ["PORT", "-1"],
    ["PORT", "3000.5"],
    ["REDIS_URL", "http://127.0.0.1:6379"],
    ["PUBLIC_BASE_URL", "not a url"],
    ["PLATFORM_ID", "Agent Market"],
    ["QUEUE_PREFIX", "a:b"],
    ["VALIDATE_RESPONSES", "maybe"],
    ["EXECUTE_SYNC_WAIT_MS", "60001"],
  ])("%s=%s is rejected with a problem naming the variable", (name, value) => {
    const error = configError({ [name]: value });
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toContain(name);
  });
});

describe("REDIS_CLUSTER", () => {
  const cluster = { REDIS_URL: "redis://10.0.0.5:7000", REDIS_CLUSTER: "true" };

  it("is off by default and accepts the default prefix {agentmarket}, whose braces are a hash tag", () => {
    expect(parseConfig({}).redisCluster).toBe(false);
    expect(parseConfig(cluster)).toMatchObject({ redisCluster: true, queuePrefix: "{agentmarket}" });
  });

  it.each(["agentmarket", "{}agentmarket", "}x{", "x{"])(
    "refuses QUEUE_PREFIX=%s (no hash tag) with one clear problem",
    (prefix) => {
      const error = configError({ ...cluster, QUEUE_PREFIX: prefix });
      expect(error.problems).toEqual([
        expect.stringMatching(
          /^QUEUE_PREFIX must contain a Redis Cluster hash tag, such as \{agentmarket\}, when REDIS_CLUSTER is on/,
        ),
      ]);
      expect(error.problems[0]).toContain(`got "${prefix}"`);
      // Without REDIS_CLUSTER the same prefix is fine (one Redis has no slots).
      expect(parseConfig({ QUEUE_PREFIX: prefix }).queuePrefix).toBe(prefix);
    },
  );

  it("follows Redis's rule for the tag: the first { and the next } with something between", () => {
    expect(["{a}", "x{a}", "{a}{b}", "x{a}y", "{{a}"].every(hasHashTag)).toBe(true);
    expect(["a", "{}a", "{}{a}", "a}", "{a"].some(hasHashTag)).toBe(false);
  });

  it("needs REDIS_URL (a seed node) and no database number", () => {
    expect(configError({ REDIS_CLUSTER: "true" }).problems).toEqual([
      expect.stringContaining("REDIS_CLUSTER needs REDIS_URL"),
    ]);
    expect(configError({ ...cluster, REDIS_URL: "redis://10.0.0.5:7000/2" }).problems).toEqual([
      expect.stringContaining("must not select a database"),
    ]);
  });
});

describe("per-queue concurrency", () => {
  it("has one variable per queue, named after the queue", () => {
    expect(Object.keys(CONCURRENCY_SETTINGS).sort()).toEqual([...QUEUE_NAMES].sort());
    expect(CONCURRENCY_SETTINGS.executions.name).toBe("EXECUTIONS_CONCURRENCY");
    expect(CONCURRENCY_SETTINGS["verification-probes"].name).toBe("VERIFICATION_PROBES_CONCURRENCY");
    expect(CONCURRENCY_SETTINGS["settlement-confirmations"].name).toBe(
      "SETTLEMENT_CONFIRMATIONS_CONCURRENCY",
    );
  });

  it("defaults to 32 for executions and 4 for every other queue", () => {
    const { queueConcurrency } = parseConfig({});
    for (const queue of QUEUE_NAMES) expect(queueConcurrency[queue]).toBe(queue === "executions" ? 32 : 4);
  });

  it("reads each queue's variable independently", () => {
    const { queueConcurrency } = parseConfig({
      EXECUTIONS_CONCURRENCY: "8",
      HEALTH_PROBES_CONCURRENCY: "2",
      PAYOUTS_CONCURRENCY: "1",
    });
    expect(queueConcurrency.executions).toBe(8);
    expect(queueConcurrency["health-probes"]).toBe(2);
    expect(queueConcurrency.payouts).toBe(1);
    expect(queueConcurrency["monitoring-runs"]).toBe(4);
  });

  it("rejects zero, non-numbers and values over 1000, one problem each", () => {
    const error = configError({
      EXECUTIONS_CONCURRENCY: "0",
      MONITORING_RUNS_CONCURRENCY: "many",
      PAYOUTS_CONCURRENCY: "1001",
    });
    expect(error.problems).toHaveLength(3);
    for (const name of ["EXECUTIONS_CONCURRENCY", "MONITORING_RUNS_CONCURRENCY", "PAYOUTS_CONCURRENCY"])
      expect(error.problems.some((p) => p.includes(name))).toBe(true);
  });
});
