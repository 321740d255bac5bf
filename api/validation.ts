import type { TSchema } from "@sinclair/typebox";
import { validationError } from "../shared/errors.js";
import { createAjv, violationsOf } from "../shared/kernel/json-schema.js";

const bodyAjv = createAjv({ useDefaults: true });
const coercingAjv = createAjv({ useDefaults: true, coerceTypes: true });
const checkingAjv = createAjv();

export type Validator = (value: unknown) => unknown;

/**
 * The JSON pointer of the first string (key or value) holding U+0000, or undefined. PostgreSQL stores
 * no NUL in text or jsonb, so such a value would fail at the insert as a 500; it is refused up front.
 * Iterative, so a deeply nested body cannot overflow the stack.
 */
function nulPath(value: unknown, base: string): string | undefined {
  const stack: [unknown, string][] = [[value, base]];
  while (stack.length) {
    const [item, path] = stack.pop()!;
    if (typeof item === "string") {
      if (item.includes("\u0000")) return path || "/";
    } else if (item && typeof item === "object") {
      for (const [key, child] of Object.entries(item)) {
        const childPath = `${path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`;
        if (key.includes("\u0000")) return childPath;
        stack.push([child, childPath]);
      }
    }
  }
  return undefined;
}

/** Compiles a request-part validator; query and path values are coerced from strings. */
export function compileValidator(schema: TSchema, part: "params" | "query" | "body"): Validator {
  const fn = (part === "body" ? bodyAjv : coercingAjv).compile(schema);
  const base = part === "body" ? "" : `/${part}`;
  return (value) => {
    if (!fn(value)) throw validationError(`request ${part} is invalid`, violationsOf(fn.errors, base));
    const nul = nulPath(value, base);
    if (nul)
      throw validationError(`request ${part} is invalid`, [
        { path: nul, message: "must not contain U+0000 (NUL)" },
      ]);
    return value;
  };
}

/** For response checks in tests (VALIDATE_RESPONSES): undefined when valid, else the violations. */
export function compileResponseCheck(schema: TSchema): (value: unknown) => string | undefined {
  const fn = checkingAjv.compile(schema);
  return (value) => (fn(value) ? undefined : JSON.stringify(violationsOf(fn.errors)));
}
