import { createHash } from "node:crypto";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { type Violation, validationError } from "../errors.js";

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** Turns ajv errors into violations with JSON-pointer paths that name the offending property. */
export function violationsOf(errors: ErrorObject[] | null | undefined, base = ""): Violation[] {
  return (errors ?? []).map((e) => {
    let path = `${base}${e.instancePath}`;
    if (e.keyword === "required")
      path = `${path}/${(e.params as { missingProperty: string }).missingProperty}`;
    if (e.keyword === "additionalProperties") {
      return {
        path: `${path}/${(e.params as { additionalProperty: string }).additionalProperty}`,
        message: "is not an allowed property",
      };
    }
    return { path: path || "/", message: e.message ?? "is invalid" };
  });
}

/** A fresh ajv with formats; listing schemas never apply defaults, so the provider sees what was sent. */
export function createAjv(
  options: { useDefaults?: boolean; coerceTypes?: boolean; addUsedSchema?: boolean } = {},
): Ajv {
  return addFormats(new Ajv({ allErrors: true, strict: false, ...options }));
}

const listingAjv = createAjv();
const compiled = new Map<string, ValidateFunction>();

/** The compiled input_schema of a listing, cached per listing id and version. */
function validatorFor(listing: {
  id: string;
  version: string;
  input_schema: Record<string, unknown>;
}): ValidateFunction {
  const cacheKey = `${listing.id}@${listing.version}`;
  let validate = compiled.get(cacheKey);
  if (!validate) {
    validate = listingAjv.compile(listing.input_schema);
    compiled.set(cacheKey, validate);
  }
  return validate;
}

/** True when the input is valid for this listing too (which fallbacks may receive it). */
export function inputMatches(
  listing: { id: string; version: string; input_schema: Record<string, unknown> },
  input: unknown,
): boolean {
  return validatorFor(listing)(input) === true;
}

/** Validates a task input (400 SCHEMA_VALIDATION_FAILED listing every violation under /input). */
export function validateListingInput(
  listing: { id: string; version: string; input_schema: Record<string, unknown> },
  input: unknown,
): void {
  const validate = validatorFor(listing);
  if (!validate(input)) {
    throw validationError(
      "input does not match the listing's input_schema",
      violationsOf(validate.errors, "/input"),
    );
  }
}

// Output schemas are not registered by $id (two listings may share one), and the cache is bounded
// because schemas change with listing edits: an evicted schema is removed from ajv's own cache too.
const outputAjv = createAjv({ addUsedSchema: false });
const outputValidators = new Map<string, ValidateFunction>();
const MAX_OUTPUT_VALIDATORS = 1000;
const MAX_REPORTED = 3;

function outputValidator(listing: { id: string; output_schema: Record<string, unknown> }): ValidateFunction {
  const schemaHash = createHash("sha256").update(JSON.stringify(listing.output_schema)).digest("hex");
  const cacheKey = `${listing.id}:${schemaHash}`;
  let validate = outputValidators.get(cacheKey);
  if (!validate) {
    try {
      validate = outputAjv.compile(listing.output_schema);
    } catch (error) {
      outputAjv.removeSchema(listing.output_schema); // ajv caches the entry before compiling it
      throw error;
    }
    if (outputValidators.size >= MAX_OUTPUT_VALIDATORS) {
      const [oldestKey, oldest] = outputValidators.entries().next().value as [string, ValidateFunction];
      outputValidators.delete(oldestKey);
      outputAjv.removeSchema(oldest.schema as object);
    }
    outputValidators.set(cacheKey, validate);
  }
  return validate;
}

/**
 * Checks a provider's output against the listing's output_schema: null when valid, else up to three
 * violations named by schema location and ajv's message. Never by instance path or value: both come
 * from the provider, and the bad output must not reach the buyer, not even through an error message.
 */
export function outputSchemaViolations(
  listing: { id: string; output_schema: Record<string, unknown> },
  output: unknown,
): string[] | null {
  let validate: ValidateFunction;
  try {
    validate = outputValidator(listing);
  } catch {
    return ["the listing's output_schema does not compile, so no output can be accepted"];
  }
  if (validate(output)) return null;
  const violations = (validate.errors ?? [])
    .slice(0, MAX_REPORTED)
    .map((e) => `${e.schemaPath} ${e.message ?? "is invalid"}`);
  return violations.length > 0 ? violations : ["does not match"];
}
