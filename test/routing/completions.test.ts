import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { db } from "../../shared/db/knex.js";
import { executeResult } from "../../shared/routing/index.js";
import { findInvocationSummary } from "../../shared/routing/store/invocations.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// The worker hands a free call's committed summary to the request waiting in the same process
// (shared/routing/completions.ts). The answer must be exactly the one a read of the row gives.

const taken = vi.hoisted(() => ({ hits: 0, misses: 0 }));
vi.mock("../../shared/routing/completions.js", async (original) => {
  const real = await original<typeof import("../../shared/routing/completions.js")>();
  return {
    ...real,
    takeCompletion: (id: string) => {
      const summary = real.takeCompletion(id);
      if (summary) taken.hits++;
      else taken.misses++;
      return summary;
    },
  };
});

let service: TestService;
let buyer: TestAgent;

beforeAll(async () => {
  service = await startService();
  buyer = await buildAgent();
});
afterAll(async () => service.stop());

describe("in-process completions", () => {
  it("answer a free execute from the worker's summary, equal to the answer the row gives", async () => {
    for (let i = 0; i < 5; i++) {
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: "echo", input: { message: `hi ${i}` } },
      });
      expect(res.status).toBe(200);
      const fromRow = executeResult((await findInvocationSummary(db(), res.body.invocation_id))!);
      expect(res.body).toEqual(JSON.parse(JSON.stringify(fromRow)));
    }
    expect(taken.hits).toBe(5);
  });
});
