import { afterAll, beforeAll, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// Keyless routes that write rows (registration, x402 quotes) are limited per client IP and route, so
// nobody can fill the database anonymously; keyed and read-only routes are not.

let service: TestService;

beforeAll(async () => {
  overrideConfig({ keylessRequestsPerMinute: 3 });
  service = await startService({ worker: false });
});
afterAll(async () => service?.stop());

/** Waits out the last seconds of a wall-clock minute, so the fixed window cannot roll over mid-test. */
async function awayFromMinuteEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

it("the fourth registration in a minute from one client is 429 with Retry-After; other routes keep their own budget", async () => {
  await awayFromMinuteEdge();
  const register = () => api("POST", "/api/quickstart", { body: { name: "limited", intent: "buyer" } });
  for (let i = 0; i < 3; i++) expect((await register()).status).toBe(201);
  const refused = await register();
  expect(refused.status).toBe(429);
  expect(errorCode(refused)).toBe("RATE_LIMITED");
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(refused.body.error.details.limit_per_minute).toBe(3);

  // Another limited route has its own budget; unlimited routes are not counted at all.
  expect((await api("GET", "/api/x402/execute/match?task=nothing-here")).status).not.toBe(429);
  for (let i = 0; i < 5; i++) expect((await api("GET", "/api/capabilities?limit=1")).status).toBe(200);
});
