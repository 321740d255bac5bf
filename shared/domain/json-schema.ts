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
export function createAjv(options: { useDefaults?: boolean; coerceTypes?: boolean } = {}): Ajv {
  return addFormats(new Ajv({ allErrors: true, strict: false, ...options }));
}

const listingAjv = createAjv();
const compiled = new Map<string, ValidateFunction>();

/**
 * Validates a task input against a listing's input_schema (400 SCHEMA_VALIDATION_FAILED listing every
 * violation under /input). Compiled schemas are cached per listing id and version.
 */
export function validateListingInput(
  listing: { id: string; version: string; input_schema: Record<string, unknown> },
  input: unknown,
): void {
  const cacheKey = `${listing.id}@${listing.version}`;
  let validate = compiled.get(cacheKey);
  if (!validate) {
    validate = listingAjv.compile(listing.input_schema);
    compiled.set(cacheKey, validate);
  }
  if (!validate(input)) {
    throw validationError(
      "input does not match the listing's input_schema",
      violationsOf(validate.errors, "/input"),
    );
  }
}
