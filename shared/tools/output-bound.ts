import { clip } from "./parse/bounds.js";

/**
 * The most bytes a tool's serialized output may take. Provider answers are capped at
 * PROVIDER_RESPONSE_MAX_BYTES (1 MB by default); character bounds alone do not guarantee that (a
 * character can take 3 bytes in UTF-8, a control character 6 once JSON-escaped), so this is the backstop.
 */
export const OUTPUT_MAX_BYTES = 900_000;

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/**
 * Shrinks an output until it serializes within maxBytes: the named arrays and strings are halved in turn
 * (arrays from the end, strings at a character boundary), `nulls` are set to null first, and the output
 * is flagged truncated. An output already within the bound is returned as it is.
 */
export function fitToBytes<T extends { truncated: boolean }>(
  output: T,
  fields: { nulls?: string[]; arrays?: string[]; strings?: string[] },
  maxBytes = OUTPUT_MAX_BYTES,
): T {
  if (bytesOf(output) <= maxBytes) return output;
  const o = output as unknown as Record<string, unknown>;
  o.truncated = true;
  for (const key of fields.nulls ?? []) {
    if (o[key] !== undefined) o[key] = null;
    if (bytesOf(o) <= maxBytes) return output;
  }
  for (let round = 0; round < 64 && bytesOf(o) > maxBytes; round++) {
    let changed = false;
    for (const key of fields.arrays ?? []) {
      const value = o[key];
      if (Array.isArray(value) && value.length > 0) {
        o[key] = value.slice(0, Math.floor(value.length / 2));
        changed = true;
      }
    }
    for (const key of fields.strings ?? []) {
      const value = o[key];
      if (typeof value === "string" && value.length > 0) {
        o[key] = clip(value, Math.floor(value.length / 2)).text;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return output;
}
