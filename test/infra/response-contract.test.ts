import { describe, expect, it } from "vitest";
import { contractViolation } from "../helpers/response-contract.js";

// The check every API test's answers go through (test/helpers/http.ts): proof that it can fail.
const base = "http://127.0.0.1:1";
const json = "application/json; charset=utf-8";
const envelope = (retryable: unknown) => ({
  success: false,
  error: {
    code: "UNAUTHORIZED",
    message: "no key",
    retryable,
    buyer_action: "register",
    fallback: "none",
    request_id: "r",
  },
});

describe("the response contract check", () => {
  it("refuses a status the route does not declare", () => {
    expect(contractViolation("GET", `${base}/api/health`, 418, json, {})).toMatch(/does not list/);
  });

  it("refuses an error envelope whose field drifted in type", () => {
    const path = `${base}/api/execute/status/00000000-0000-0000-0000-000000000000`;
    expect(contractViolation("GET", path, 401, json, envelope(false))).toBeUndefined();
    expect(contractViolation("GET", path, 401, json, envelope(1))).toMatch(/retryable/);
  });

  it("refuses a listing record flag served as a boolean where the spec says 0/1", () => {
    const path = `${base}/api/capabilities/00000000-0000-0000-0000-000000000000`;
    const violation = contractViolation("GET", path, 200, json, { featured: true });
    expect(violation).toMatch(/featured/);
  });

  it("leaves paths the document does not declare alone", () => {
    expect(contractViolation("GET", `${base}/no/such/path`, 404, json, {})).toBeUndefined();
  });
});
