import type { ValidateFunction } from "ajv";
import { allRoutes } from "../../api/app.js";
import { buildOpenApi } from "../../api/openapi.js";
import { createAjv, violationsOf } from "../../shared/kernel/json-schema.js";

// Every answer the API tests receive from our API is checked against the OpenAPI document the service
// publishes (generated from the same route declarations): its status must be declared for the route,
// and a JSON body must match the declared schema — errors included, which use the ErrorEnvelope. So a
// field that drifts in type (a boolean served as 0/1, a string served as a number) fails a test.

interface Operation {
  method: string;
  pattern: RegExp;
  template: string;
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
}

let operations: Operation[] | undefined;
const validators = new Map<string, ValidateFunction>();
const ajv = createAjv();

function load(): Operation[] {
  if (operations) return operations;
  const doc = buildOpenApi(allRoutes()) as unknown as {
    paths: Record<string, Record<string, { responses: Operation["responses"] }>>;
    components: { schemas: Record<string, unknown> };
  };
  ajv.addSchema({ $id: "openapi-components", components: doc.components }, "openapi-components");
  operations = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
    for (const [method, op] of Object.entries(methods)) {
      operations.push({ method: method.toUpperCase(), pattern, template, responses: op.responses });
    }
  }
  // A literal path wins over a template that also matches it (/api/x/search before /api/x/{id}).
  operations.sort((a, b) => a.template.split("{").length - b.template.split("{").length);
  return operations;
}

/** Rewrites the document's local component references to the registered components schema. */
function resolvable(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi-components#/components/'));
}

/**
 * The contract violations of one answer, or undefined when it keeps the contract. Paths the document
 * does not declare (an unknown path's 404, the seller-facing test servers) are not ours to check.
 */
export function contractViolation(
  method: string,
  url: string,
  status: number,
  contentType: string | null,
  body: unknown,
): string | undefined {
  const path = new URL(url).pathname;
  const op = load().find((o) => o.method === method.toUpperCase() && o.pattern.test(path));
  if (!op) return undefined;
  const declared = op.responses[String(status)];
  if (!declared) {
    return `${method} ${op.template} answered ${status}, which its OpenAPI declaration does not list (declared: ${Object.keys(op.responses).join(", ")})`;
  }
  if (!contentType?.includes("json") || body === undefined) return undefined;
  const schema = declared.content?.["application/json"]?.schema;
  if (!schema) return undefined;
  const key = `${op.method} ${op.template} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile(resolvable(schema) as object);
    validators.set(key, validate);
  }
  if (validate(body)) return undefined;
  return `${key} breaks its declared schema: ${JSON.stringify(violationsOf(validate.errors))}`;
}
