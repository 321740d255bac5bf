// Request generation for the route fuzzer (test/reliability/fuzz.test.ts, docs/reliability.md "Fuzz"):
// from the OpenAPI document the service serves, one valid request per operation and its mutations —
// wrong types, missing and extra fields, huge strings, deep JSON, NUL and odd Unicode, bad encodings,
// bad and foreign keys, oversized bodies, odd methods and content types. Deterministic for a seed, so
// a failing case can be replayed from the line the test prints.

import { pick, rng } from "../../bench/catalog/random.js";

export interface FuzzRequest {
  /** The mutation class, for the report (valid, wrong_type, missing_field, …). */
  kind: string;
  method: string;
  path: string;
  /** The operation it was derived from ("POST /api/execute"), for the report. */
  operation: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

export interface FuzzContext {
  /** A key of the fuzzing agent, and one of another agent (for "foreign key" cases). */
  key: string;
  foreignKey: string;
  /** Real ids to put into path parameters by name (listing_id → listing ids…), besides random ones. */
  ids: Record<string, string[]>;
  /** REQUEST_BODY_MAX_BYTES: an oversized body is one byte more. */
  bodyLimit: number;
}

interface Operation {
  method: string;
  template: string;
  security: unknown[];
  parameters: { name: string; in: "path" | "query"; required: boolean; schema: Schema }[];
  body?: Schema;
}

type Schema = Record<string, unknown>;

function uuid(rand: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rand() * 16).toString(16)).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20)}`;
}

/** The operations of an OpenAPI document, with $refs in request bodies resolved. */
export function operationsOf(doc: {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components?: { schemas?: Record<string, Schema> };
}): Operation[] {
  const resolve = (schema: Schema | undefined): Schema | undefined => {
    const ref = schema?.$ref as string | undefined;
    if (!ref) return schema;
    return doc.components?.schemas?.[ref.split("/").pop()!];
  };
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const content = (op.requestBody as { content?: Record<string, { schema: Schema }> } | undefined)
        ?.content;
      ops.push({
        method: method.toUpperCase(),
        template,
        security: (op.security as unknown[]) ?? [],
        parameters: (op.parameters as Operation["parameters"]) ?? [],
        body: resolve(content?.["application/json"]?.schema),
      });
    }
  }
  return ops;
}

/** A value that satisfies the schema as far as a small generator can (enums, formats, bounds, required). */
export function sample(schema: Schema | undefined, rand: () => number, depth = 0): unknown {
  if (!schema || depth > 6) return {};
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum)) return pick(rand, schema.enum);
  if ("default" in schema && rand() < 0.3) return schema.default;
  for (const key of ["anyOf", "oneOf"] as const) {
    const options = schema[key] as Schema[] | undefined;
    if (options?.length) return sample(pick(rand, options), rand, depth + 1);
  }
  if (Array.isArray(schema.allOf))
    return sample(Object.assign({}, ...(schema.allOf as Schema[])), rand, depth + 1);
  const type = Array.isArray(schema.type)
    ? pick(rand, schema.type as string[])
    : (schema.type as string | undefined);
  switch (type) {
    case "string":
      return sampleString(schema, rand);
    case "integer":
    case "number": {
      const min =
        (schema.minimum as number | undefined) ?? (schema.exclusiveMinimum as number | undefined) ?? 0;
      const max = (schema.maximum as number | undefined) ?? min + 10;
      const value = min + rand() * (max - min);
      return type === "integer" ? Math.ceil(value) : Number(value.toFixed(2));
    }
    case "boolean":
      return rand() < 0.5;
    case "null":
      return null;
    case "array": {
      const n = Math.max((schema.minItems as number | undefined) ?? 0, rand() < 0.5 ? 1 : 0);
      return Array.from({ length: Math.min(n, 3) }, () => sample(schema.items as Schema, rand, depth + 1));
    }
    default: {
      const out: Record<string, unknown> = {};
      const properties = (schema.properties as Record<string, Schema> | undefined) ?? {};
      const required = new Set((schema.required as string[] | undefined) ?? []);
      for (const [name, prop] of Object.entries(properties))
        if (required.has(name) || rand() < 0.5) out[name] = sample(prop, rand, depth + 1);
      return out;
    }
  }
}

function sampleString(schema: Schema, rand: () => number): string {
  switch (schema.format) {
    case "uuid":
      return uuid(rand);
    case "date-time":
      return new Date(Date.UTC(2026, 10, 25)).toISOString();
    case "uri":
    case "url":
      return "https://example.com/a";
    case "email":
      return "a@example.com";
  }
  const min = (schema.minLength as number | undefined) ?? 1;
  const max = (schema.maxLength as number | undefined) ?? Math.max(min, 12);
  if (typeof schema.pattern === "string" && /0x\[0-9a-fA-F\]\{(\d+)\}/.test(schema.pattern)) {
    const n = Number(/\{(\d+)\}/.exec(schema.pattern)![1]);
    return `0x${"ab".repeat(n).slice(0, n)}`;
  }
  const length = Math.min(max, Math.max(min, 1 + Math.floor(rand() * 10)));
  return Array.from({ length }, () => pick(rand, [..."abcdefghijklmnopqrstuvwxyz"])).join("");
}

/** Values of the other JSON types than the schema's, for "wrong type" cases. */
const WRONG_TYPES: unknown[] = [42, -1.5, true, null, "text", [], {}, [1, 2], { a: 1 }, 1e308, ""];

const ODD_STRINGS = [
  "\u0000",
  "a\u0000b",
  "\ud800",
  "\udfff\ud800",
  "\u202e\u202d",
  "\uffff\ufffe",
  "💥🧨",
  "' or 1=1 --",
  "../../etc/passwd",
  "%00%ff",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a log-injection probe, sent as is
  "${jndi:x}",
  "<script>alert(1)</script>",
  "__proto__",
  "\r\n\r\nX: y",
];

function deepJson(depth: number, rand: () => number): string {
  const [open, close] = rand() < 0.5 ? ["[", "]"] : ['{"a":', "}"];
  return `${open.repeat(depth)}1${close.repeat(depth)}`;
}

/** encodeURIComponent, except that a lone surrogate (not encodable) becomes CESU bytes: invalid UTF-8. */
function encode(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return value
      .replace(/[\ud800-\udfff]/g, "\u0000")
      .split("\u0000")
      .map(encodeURIComponent)
      .join("%ED%A0%80");
  }
}

function fillPath(
  op: Operation,
  ctx: FuzzContext,
  rand: () => number,
  override?: (name: string) => string,
): string {
  return op.template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (override) return override(name);
    const known = ctx.ids[name] ?? [];
    return encode(known.length && rand() < 0.7 ? pick(rand, known) : uuid(rand));
  });
}

function queryString(op: Operation, rand: () => number, mutate?: (name: string) => string): string {
  const parts: string[] = [];
  for (const p of op.parameters.filter((p) => p.in === "query")) {
    if (!p.required && rand() < 0.4 && !mutate) continue;
    const value = mutate ? mutate(p.name) : String(sample(p.schema, rand));
    parts.push(`${encode(p.name)}=${encode(value)}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

function authHeaders(op: Operation, ctx: FuzzContext): Record<string, string> {
  return op.security.length ? { authorization: `Bearer ${ctx.key}` } : {};
}

const JSON_TYPE = { "content-type": "application/json" };

/**
 * The requests of one round for one operation: a valid one and one of each mutation class that applies.
 * Each round (a new seed) draws other values.
 */
export function requestsFor(op: Operation, ctx: FuzzContext, seed: number): FuzzRequest[] {
  const rand = rng(seed);
  const operation = `${op.method} ${op.template}`;
  const hasBody = op.body !== undefined;
  const make = (kind: string, over: Partial<FuzzRequest> = {}): FuzzRequest => ({
    kind,
    method: op.method,
    path: fillPath(op, ctx, rand) + queryString(op, rand),
    operation,
    headers: { ...authHeaders(op, ctx), ...(hasBody ? JSON_TYPE : {}) },
    ...(hasBody ? { body: JSON.stringify(sample(op.body, rand)) } : {}),
    ...over,
  });
  const valid = () => sample(op.body, rand) as Record<string, unknown>;
  const out: FuzzRequest[] = [make("valid"), make("valid")];

  // Bodies: each applies only where the operation takes one.
  if (hasBody) {
    const props = Object.keys((op.body?.properties as Record<string, unknown> | undefined) ?? {});
    const required = (op.body?.required as string[] | undefined) ?? [];
    const field = props.length ? pick(rand, props) : "x";
    const withField = (value: unknown) => JSON.stringify({ ...valid(), [field]: value });
    if (required.length) {
      const body = valid();
      delete body[pick(rand, required)];
      out.push(make("missing_field", { body: JSON.stringify(body) }));
    }
    out.push(make("wrong_type", { body: withField(pick(rand, WRONG_TYPES)) }));
    out.push(make("wrong_type", { body: JSON.stringify(pick(rand, WRONG_TYPES)) }));
    out.push(
      make("extra_field", {
        body: JSON.stringify({
          ...valid(),
          [`extra_${Math.floor(rand() * 1e6)}`]: 1,
          constructor: { prototype: 1 },
        }),
      }),
    );
    out.push(
      make("extra_field", { body: `{"__proto__":{"admin":true},${JSON.stringify(valid()).slice(1)}` }),
    );
    out.push(make("huge_string", { body: withField("x".repeat(pick(rand, [5_000, 70_000, 300_000]))) }));
    out.push(make("deep_json", { body: `{"${field}":${deepJson(pick(rand, [64, 2_000, 100_000]), rand)}}` }));
    out.push(make("deep_json", { body: deepJson(pick(rand, [1_000, 50_000]), rand) }));
    out.push(make("odd_unicode", { body: withField(pick(rand, ODD_STRINGS)) }));
    out.push(
      make("odd_unicode", { body: JSON.stringify({ [pick(rand, ODD_STRINGS)]: pick(rand, ODD_STRINGS) }) }),
    );
    out.push(
      make("bad_encoding", {
        body: Uint8Array.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]),
      }),
    );
    out.push(make("bad_encoding", { body: `\ufeff${JSON.stringify(valid())}` }));
    out.push(
      make("malformed_json", {
        body: pick(rand, ["{", '{"a":}', "[1,]", "nul", "{'a':1}", '{"a":1}}', "\u0000"]),
      }),
    );
    out.push(make("oversized_body", { body: `{"${field}":"${"y".repeat(ctx.bodyLimit + 1)}"}` }));
    out.push(
      make("content_type", {
        headers: {
          ...authHeaders(op, ctx),
          "content-type": pick(rand, [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=utf-16",
            "application/xml",
          ]),
        },
      }),
    );
    out.push(make("content_type", { headers: authHeaders(op, ctx) }));
  }

  // Keys: every operation, keyed or not (a keyless route must ignore a bad key, not fail on it).
  out.push(
    make("bad_key", { headers: { ...(hasBody ? JSON_TYPE : {}), authorization: pick(rand, BAD_KEYS) } }),
  );
  out.push(make("bad_key", { headers: { ...(hasBody ? JSON_TYPE : {}) } }));
  out.push(
    make("foreign_key", {
      headers: { ...(hasBody ? JSON_TYPE : {}), authorization: `Bearer ${ctx.foreignKey}` },
    }),
  );

  // Path and query parameters.
  if (op.template.includes("{")) {
    out.push(
      make("bad_path_param", {
        path: fillPath(op, ctx, rand, () => encode(pick(rand, BAD_IDS))),
      }),
    );
    out.push(
      make("bad_path_param", {
        path: fillPath(op, ctx, rand, () => pick(rand, ["%00", "%ff%fe", "..%2f..%2f", "%"])),
      }),
    );
  }
  if (op.parameters.some((p) => p.in === "query")) {
    out.push(
      make("bad_query", {
        path:
          fillPath(op, ctx, rand) +
          queryString(op, rand, () => pick(rand, [...ODD_STRINGS, "x".repeat(20_000), "-1", "1e999", "NaN"])),
      }),
    );
    out.push(
      make("bad_query", {
        path: `${fillPath(op, ctx, rand)}?${pick(rand, ["a=1&a=2", "%", "=&=", "q[]=1&q[a]=2", "__proto__[x]=1"])}`,
      }),
    );
  }

  // Payment headers the x402 edge parses: garbage, wrong base64, a v1 payload, an MPP credential.
  if (op.template.startsWith("/api/x402/") || op.template.startsWith("/api/tumbler/")) {
    const garbage = pick(rand, [
      "garbage",
      Buffer.from("{}").toString("base64"),
      Buffer.from(JSON.stringify({ x402Version: 2, payload: { signature: "0x00" } })).toString("base64"),
      Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact", network: "base", payload: {} })).toString(
        "base64",
      ),
      "%%%",
      "x".repeat(9000),
    ]);
    const header = pick(rand, ["payment-signature", "x-payment-signature", "x-payment"]);
    out.push(
      make("bad_payment", {
        headers: { ...authHeaders(op, ctx), ...(hasBody ? JSON_TYPE : {}), [header]: garbage },
      }),
    );
    out.push(
      make("bad_payment", {
        headers: {
          ...(hasBody ? JSON_TYPE : {}),
          authorization: `Payment ${pick(rand, ["", "id=1", garbage, 'id="x", credential="e30"'])}`,
        },
      }),
    );
  }

  // Methods the operation does not declare, and the same path with its trailing slash.
  out.push(
    make("odd_method", { method: pick(rand, ["PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND", "TRACE"]) }),
  );
  return out;
}

const BAD_KEYS = [
  `Bearer amk_${"0".repeat(40)}`,
  "Bearer ",
  "Bearer amk_",
  `Bearer ${"a".repeat(5000)}`,
  "Basic YWRtaW46YWRtaW4=",
  "bearer\tamk_x",
  "Bearer amk_\u00e9\u00ff",
  "Payment garbage",
  "Bearer amk_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx, Bearer y",
];

const BAD_IDS = [
  "not-a-uuid",
  "0",
  "-1",
  "00000000-0000-0000-0000-000000000000",
  "x".repeat(2000),
  "' or 1=1 --",
  "null",
  "1e308",
];
