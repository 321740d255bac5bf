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

/**
 * Compiled listing schemas, bounded, found by content: a schema edited by any writer (the seller API,
 * which bumps the version, or a migration or an operator, which may not) compiles anew. The same schema
 * object, as a kept task read hands it out on every execute (docs/architecture.md "Caches that are
 * proved"), is found without serialising it. Schemas are not registered by $id (two listings may share
 * one), and an evicted schema leaves ajv's own cache too.
 */
class CompiledSchemas {
  private readonly ajv = createAjv({ addUsedSchema: false });
  private readonly byObject = new WeakMap<object, ValidateFunction>();
  private readonly byText = new Map<string, ValidateFunction>();

  constructor(private readonly max: number) {}

  get(schema: Record<string, unknown>): ValidateFunction {
    let validate = this.byObject.get(schema);
    if (validate) return validate;
    const text = JSON.stringify(schema);
    validate = this.byText.get(text);
    if (!validate) {
      try {
        validate = this.ajv.compile(schema);
      } catch (error) {
        this.ajv.removeSchema(schema); // ajv caches the entry before compiling it
        throw error;
      }
      if (this.byText.size >= this.max) {
        const [oldestText, oldest] = this.byText.entries().next().value as [string, ValidateFunction];
        this.byText.delete(oldestText);
        this.ajv.removeSchema(oldest.schema as object);
      }
      this.byText.set(text, validate);
    }
    this.byObject.set(schema, validate);
    return validate;
  }
}

const inputSchemas = new CompiledSchemas(1000);

/** The compiled input_schema of a listing. */
function validatorFor(listing: { input_schema: Record<string, unknown> }): ValidateFunction {
  return inputSchemas.get(listing.input_schema);
}

/** True when the input is valid for this listing too (which fallbacks may receive it). */
export function inputMatches(listing: { input_schema: Record<string, unknown> }, input: unknown): boolean {
  return validatorFor(listing)(input) === true;
}

/** Validates a task input (400 SCHEMA_VALIDATION_FAILED listing every violation under /input). */
export function validateListingInput(
  listing: { input_schema: Record<string, unknown> },
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

const outputSchemas = new CompiledSchemas(1000);
const MAX_REPORTED = 3;

/**
 * Checks a provider's output against the listing's output_schema: null when valid, else up to three
 * violations named by schema location and ajv's message. Never by instance path or value: both come
 * from the provider, and the bad output must not reach the buyer, not even through an error message.
 */
export function outputSchemaViolations(
  outputSchema: Record<string, unknown>,
  output: unknown,
): string[] | null {
  let validate: ValidateFunction;
  try {
    validate = outputSchemas.get(outputSchema);
  } catch {
    return ["the listing's output_schema does not compile, so no output can be accepted"];
  }
  if (validate(output)) return null;
  const violations = (validate.errors ?? [])
    .slice(0, MAX_REPORTED)
    .map((e) => `${e.schemaPath} ${e.message ?? "is invalid"}`);
  return violations.length > 0 ? violations : ["does not match"];
}
