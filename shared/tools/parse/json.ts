import { PARSE_BOUNDS } from "./bounds.js";

type JsonType = "object" | "array" | "string" | "number" | "boolean" | "null";

export interface JsonOutput {
  format: "json";
  valid: boolean;
  error: string | null;
  /** The parsed value, or null when it was left out (too deep or too large: truncated). */
  value: unknown;
  stats: {
    root_type: JsonType | null;
    max_depth: number;
    nodes: number;
    counts: Record<JsonType, number>;
    max_array_length: number;
    max_object_keys: number;
    paths: { path: string; types: Partial<Record<JsonType, number>> }[];
  };
  truncated: boolean;
}

function typeOf(value: unknown): JsonType {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value as JsonType;
}

/** One path segment: [] for array items (shape, not position), .key otherwise. */
function segment(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key.slice(0, 100))}]`;
}

/**
 * JSON → a validated echo plus shape stats. The walk is iterative (an explicit stack), so depth costs
 * memory, not call stack; paths count types per JSON path, array items folded into "[]".
 */
export function parseJson(text: string): JsonOutput {
  const counts: Record<JsonType, number> = { object: 0, array: 0, string: 0, number: 0, boolean: 0, null: 0 };
  const empty: JsonOutput["stats"] = {
    root_type: null,
    max_depth: 0,
    nodes: 0,
    counts,
    max_array_length: 0,
    max_object_keys: 0,
    paths: [],
  };
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (error) {
    return {
      format: "json",
      valid: false,
      error: String((error as Error).message).slice(0, 300),
      value: null,
      stats: empty,
      truncated: false,
    };
  }
  let truncated = false;
  const paths = new Map<string, Partial<Record<JsonType, number>>>();
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: root, path: "$", depth: 1 }];
  const stats = { ...empty, root_type: typeOf(root) };
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    const type = typeOf(value);
    counts[type] += 1;
    stats.nodes += 1;
    if (depth > stats.max_depth) stats.max_depth = depth;
    let entry = paths.get(path);
    if (!entry && paths.size < PARSE_BOUNDS.jsonPaths) {
      entry = {};
      paths.set(path, entry);
    } else if (!entry) truncated = true;
    if (entry) entry[type] = (entry[type] ?? 0) + 1;
    if (type === "array") {
      const items = value as unknown[];
      if (items.length > stats.max_array_length) stats.max_array_length = items.length;
      const itemPath = `${path}[]`;
      for (let i = items.length - 1; i >= 0; i--)
        stack.push({ value: items[i], path: itemPath, depth: depth + 1 });
    } else if (type === "object") {
      const keys = Object.keys(value as object);
      if (keys.length > stats.max_object_keys) stats.max_object_keys = keys.length;
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        stack.push({
          value: (value as Record<string, unknown>)[key],
          path: `${path}${segment(key)}`,
          depth: depth + 1,
        });
      }
    }
  }
  let echo: unknown = root;
  if (stats.max_depth > PARSE_BOUNDS.jsonEchoDepth || text.length > PARSE_BOUNDS.outputChars) {
    echo = null;
    truncated = true;
  }
  stats.paths = [...paths].map(([path, types]) => ({ path, types }));
  return { format: "json", valid: true, error: null, value: echo, stats, truncated };
}
