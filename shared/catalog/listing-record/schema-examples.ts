/**
 * Example payloads and summaries derived from a listing's JSON Schemas. Examples prefer what the seller
 * wrote (examples, const, default, enum) and fall back to type-shaped placeholders, and say which they
 * used, so an example is never mistaken for observed traffic.
 */

type Schema = Record<string, unknown>;

export interface SchemaExample {
  value: unknown;
  /** True when some part of the value is a type-shaped placeholder rather than seller-declared. */
  placeholder: boolean;
}

const MAX_DEPTH = 4;

function isObject(value: unknown): value is Schema {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The schema's own example value: examples[0], example, const, default or enum[0], in that order. */
function declaredExample(schema: Schema): { found: boolean; value?: unknown } {
  if (Array.isArray(schema.examples) && schema.examples.length > 0)
    return { found: true, value: schema.examples[0] };
  for (const key of ["example", "const", "default"]) {
    if (key in schema) return { found: true, value: schema[key] };
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return { found: true, value: schema.enum[0] };
  return { found: false };
}

function schemaType(schema: Schema): string | undefined {
  const type = schema.type;
  if (typeof type === "string") return type;
  if (Array.isArray(type)) return type.find((t) => t !== "null") as string | undefined;
  if (isObject(schema.properties)) return "object";
  return undefined;
}

function placeholderString(schema: Schema): string {
  const byFormat: Record<string, string> = {
    uri: "https://example.com",
    url: "https://example.com",
    email: "buyer@example.com",
    "date-time": "2026-01-01T00:00:00Z",
    date: "2026-01-01",
    uuid: "00000000-0000-4000-8000-000000000000",
  };
  const format = typeof schema.format === "string" ? byFormat[schema.format] : undefined;
  let text = format ?? "example";
  const min = typeof schema.minLength === "number" ? schema.minLength : 0;
  while (text.length < min) text = `${text} example`;
  const max = typeof schema.maxLength === "number" ? schema.maxLength : Number.POSITIVE_INFINITY;
  return text.slice(0, Math.max(min, Math.min(text.length, max)));
}

function placeholderNumber(schema: Schema, integer: boolean): number {
  let value = 0;
  if (typeof schema.minimum === "number") value = schema.minimum;
  else if (typeof schema.exclusiveMinimum === "number") value = schema.exclusiveMinimum + (integer ? 1 : 0.5);
  if (typeof schema.maximum === "number" && value > schema.maximum) value = schema.maximum;
  return integer ? Math.ceil(value) : value;
}

function objectExample(schema: Schema, depth: number): SchemaExample {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const value: Record<string, unknown> = {};
  let placeholder = false;
  for (const [name, child] of Object.entries(properties)) {
    if (!isObject(child)) continue;
    // Optional properties appear only when the seller gave them a value: an example stays minimal.
    if (!required.has(name) && !declaredExample(child).found) continue;
    const example = exampleFromSchema(child, depth + 1);
    value[name] = example.value;
    placeholder ||= example.placeholder;
  }
  for (const name of required) {
    if (!(name in value)) {
      value[name] = "example";
      placeholder = true;
    }
  }
  return { value, placeholder };
}

/** An example instance of a JSON Schema: declared values first, type-shaped placeholders otherwise. */
export function exampleFromSchema(schema: unknown, depth = 0): SchemaExample {
  if (!isObject(schema) || depth > MAX_DEPTH) return { value: {}, placeholder: true };
  const declared = declaredExample(schema);
  if (declared.found) return { value: declared.value, placeholder: false };
  switch (schemaType(schema)) {
    case "object":
      return objectExample(schema, depth);
    case "array": {
      const minItems = typeof schema.minItems === "number" ? schema.minItems : 0;
      if (minItems === 0) return { value: [], placeholder: true };
      const item = exampleFromSchema(schema.items, depth + 1);
      return { value: Array.from({ length: minItems }, () => item.value), placeholder: true };
    }
    case "string":
      return { value: placeholderString(schema), placeholder: true };
    case "integer":
      return { value: placeholderNumber(schema, true), placeholder: true };
    case "number":
      return { value: placeholderNumber(schema, false), placeholder: true };
    case "boolean":
      return { value: false, placeholder: true };
    default:
      return { value: {}, placeholder: true };
  }
}

/** The input example for a request body: always an object, as POST /api/execute requires. */
export function exampleInput(schema: Record<string, unknown>): SchemaExample {
  const example = exampleFromSchema(schema);
  return isObject(example.value) ? example : { value: {}, placeholder: true };
}

/** {type, required, properties, property_count} of a schema: what a buyer scans before calling. */
export function summarizeSchema(schema: Record<string, unknown>) {
  const type = schema.type ?? (isObject(schema.properties) ? "object" : null);
  const properties = isObject(schema.properties) ? Object.keys(schema.properties) : [];
  const required = Array.isArray(schema.required)
    ? schema.required.filter((r): r is string => typeof r === "string")
    : [];
  return {
    type: type as string | string[] | null,
    ...(type === null ? { type_null_reason: "schema_declares_no_type" } : {}),
    required,
    properties,
    property_count: properties.length,
  };
}
