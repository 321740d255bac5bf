import type { TObject, TSchema } from "@sinclair/typebox";
import { getConfig } from "../shared/config.js";
import { ERRORS } from "../shared/errors.js";
import { ErrorEnvelope } from "../shared/kernel/wire.js";
import type { RouteDef } from "./route.js";

/** TypeBox schemas carry symbol keys; a JSON round trip leaves plain JSON Schema. */
export function plain(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema));
}

function parameters(schema: TObject | undefined, where: "path" | "query") {
  if (!schema) return [];
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties).map(([name, prop]) => ({
    name,
    in: where,
    required: where === "path" || required.has(name),
    schema: plain(prop),
  }));
}

function operation(def: RouteDef) {
  const responses: Record<string, unknown> = {};
  for (const [status, schema] of Object.entries(def.responses)) {
    const mime = def.contentType ?? "application/json";
    responses[status] = {
      description: `HTTP ${status}`,
      content: { [mime]: { schema: plain(schema as TSchema) } },
    };
  }
  for (const code of def.errors ?? []) {
    const status = String(ERRORS[code].status);
    const existing = responses[status] as { description: string } | undefined;
    responses[status] = {
      description: existing ? `${existing.description}, ${code}` : `error ${code}`,
      content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
    };
  }
  // Refusals every route of its shape can give before its handler runs (api/mount.ts, json-body.ts).
  if (def.params || def.query || def.body) responses["400"] ??= errorResponse("SCHEMA_VALIDATION_FAILED");
  if (def.body) responses["413"] ??= errorResponse("REQUEST_TOO_LARGE");
  // Query values live in the URL: past 16 KiB of request line and headers, the server answers 431.
  if (def.query) responses["431"] ??= errorResponse("HEADERS_TOO_LARGE");
  if (def.auth !== "none") responses["401"] ??= errorResponse("UNAUTHORIZED");
  if (def.limitPerClient) responses["429"] ??= errorResponse("RATE_LIMITED");
  return {
    operationId: `${def.method}${def.path.replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`,
    summary: def.summary,
    ...(def.description ? { description: def.description } : {}),
    tags: [def.tag],
    security: SECURITY[def.auth],
    parameters: [...parameters(def.params, "path"), ...parameters(def.query, "query")],
    ...(def.body
      ? { requestBody: { required: true, content: { "application/json": { schema: plain(def.body) } } } }
      : {}),
    responses,
    ...(def.paymentInfo ? { "x-payment-info": def.paymentInfo } : {}),
  };
}

/** OpenAPI security per route auth; key_or_admin accepts either bearer (an API key or the admin key). */
const SECURITY: Record<RouteDef["auth"], Record<string, string[]>[]> = {
  none: [],
  key: [{ bearerAuth: [] }],
  admin: [{ adminAuth: [] }],
  key_or_admin: [{ bearerAuth: [] }, { adminAuth: [] }],
  platform: [{ platformSignature: [] }],
};

function errorResponse(code: keyof typeof ERRORS) {
  return {
    description: `error ${code}`,
    content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } },
  };
}

/** The OpenAPI 3.1 document, generated from the same declarations that route and validate requests. */
export function buildOpenApi(routes: RouteDef[], baseUrl: string = getConfig().publicBaseUrl) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const def of routes) {
    paths[def.path] ??= {};
    paths[def.path]![def.method] = operation(def);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Agent Market API",
      version: "0.1.0",
      description:
        "Marketplace and task router for software agents. Every error uses the ErrorEnvelope schema; " +
        "error codes, retryability, buyer actions and fallbacks are listed in x-error-codes.",
    },
    servers: [{ url: baseUrl }],
    // Payment discovery (docs/discovery.md "OpenAPI for payment discovery"): the MPP draft reads
    // x-service-info, x402scan reads x-discovery; paid operations carry x-payment-info in both dialects.
    "x-service-info": {
      categories: ["agent-marketplace", "task-routing", "payments"],
      docs: {
        apiReference: `${baseUrl}/openapi.json`,
        homepage: `${baseUrl}/api/quickstart`,
        llms: `${baseUrl}/llms.txt`,
      },
    },
    "x-discovery": { ownershipProofs: [], llmsTxtUrl: `${baseUrl}/llms.txt` },
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description: "API key from POST /api/quickstart (amk_…)",
        },
        adminAuth: {
          type: "http",
          scheme: "bearer",
          description: "operator secret ADMIN_API_KEY; the admin API answers 404 when it is not configured",
        },
        platformSignature: {
          type: "apiKey",
          in: "header",
          name: "webhook-signature",
          description:
            "the platform's own Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature v1a Ed25519 by a key of /.well-known/jwks.json): hosted tool endpoints serve only the executions worker",
        },
      },
      schemas: { ErrorEnvelope: plain(ErrorEnvelope) },
    },
    "x-error-codes": Object.fromEntries(
      Object.entries(ERRORS).map(([code, spec]) => [
        code,
        {
          status: spec.status,
          retryable: spec.retryable,
          ...("specRetryable" in spec ? { spec_retryable: spec.specRetryable } : {}),
          buyer_action: spec.buyerAction,
          fallback: spec.fallback,
        },
      ]),
    ),
  };
}
