import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { allRoutes } from "../../api/app.js";
import { api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let doc: any;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
  const res = await api("GET", "/openapi.json");
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(async () => service.stop());

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3.1.0 document", async () => {
    expect(doc.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(doc);
    if (!result.valid) console.error(JSON.stringify(result.errors, null, 2));
    expect(result.valid).toBe(true);
  });

  it("lists every declared route under its path and method", () => {
    const routes = allRoutes();
    expect(routes.length).toBeGreaterThan(5);
    for (const route of routes)
      expect(doc.paths[route.path]?.[route.method], `${route.method} ${route.path}`).toBeDefined();
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops as object).map((method) => `${method} ${path}`),
    );
    expect(documented.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
  });

  it("marks every key route with bearerAuth, admin routes with adminAuth, both with a 401 response, and key-less routes with no security", () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.securitySchemes.adminAuth).toMatchObject({ type: "http", scheme: "bearer" });
    for (const route of allRoutes()) {
      const op = doc.paths[route.path][route.method];
      if (route.auth !== "none") {
        const schemes = {
          key: ["bearerAuth"],
          admin: ["adminAuth"],
          key_or_admin: ["bearerAuth", "adminAuth"],
          platform: ["platformSignature"],
        }[route.auth];
        expect(op.security, `${route.method} ${route.path}`).toEqual(schemes.map((s) => ({ [s]: [] })));
        expect(op.responses["401"], `${route.method} ${route.path}`).toBeDefined();
        expect(op.responses["401"].content["application/json"].schema.$ref).toBe(
          "#/components/schemas/ErrorEnvelope",
        );
      } else {
        expect(op.security, `${route.method} ${route.path}`).toEqual([]);
      }
    }
  });

  it("declares a path parameter for every {placeholder}", () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      const placeholders = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      for (const op of Object.values(ops as Record<string, any>)) {
        const declared = op.parameters
          .filter((p: any) => p.in === "path")
          .map((p: any) => p.name)
          .sort();
        expect(declared, path).toEqual(placeholders);
      }
    }
  });

  it("gives every operation a unique operationId", () => {
    const ids = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops as Record<string, any>).map((op) => op.operationId),
    );
    expect(ids.every((id) => typeof id === "string" && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("has the ErrorEnvelope component with the envelope's fields", () => {
    const envelope = doc.components.schemas.ErrorEnvelope;
    expect(envelope).toBeDefined();
    expect(Object.keys(envelope.properties).sort()).toEqual(["error", "success"]);
    expect(envelope.properties.error.required).toEqual(
      expect.arrayContaining(["code", "message", "retryable", "buyer_action", "fallback", "request_id"]),
    );
  });
});

describe("GET /openapi.yaml", () => {
  it("parses to the same document as the JSON form", async () => {
    const res = await api("GET", "/openapi.yaml");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("yaml");
    expect(parse(res.text)).toEqual(doc);
  });
});
