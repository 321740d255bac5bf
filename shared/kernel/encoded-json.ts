// A JSON document a context has encoded itself, as UTF-8 bytes in parts, for an answer whose parts it
// keeps encoded (kept listing records: shared/catalog/record-cache.ts). The HTTP layer writes the parts as
// they are, unjoined, as application/json, and checks what they decode to against the route's schema as
// it checks any body (api/mount.ts). Bytes, not one string: handed a 2.8 MB string (a catalog page of
// 100), Koa measures it and the socket encodes it whole, ~7 ms together, where each part's bytes are made
// once, small (docs/benchmarks.md "The thirty-eighth round"); parts, not one buffer: a fresh buffer of
// the whole document per answer cost more than the kept parts saved ("The thirty-ninth round").

export class EncodedJson {
  /** The document's length in bytes. */
  readonly byteLength: number;

  constructor(readonly parts: readonly Buffer[]) {
    this.byteLength = parts.reduce((n, part) => n + part.length, 0);
  }

  /** The document's bytes in one buffer (checks and tests read it; an answer writes the parts). */
  bytes(): Buffer {
    return this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
  }

  /** The document as text (checks and tests read it). */
  text(): string {
    return this.bytes().toString("utf8");
  }

  /** The document, decoded. */
  parse(): unknown {
    return JSON.parse(this.text());
  }
}

const COMMA = Buffer.from(",");

/**
 * `{ …head, [key]: [items…], …rest }` as JSON, the array's items given as their encoded JSON: byte for
 * byte the UTF-8 of what JSON.stringify gives for that object with the items decoded.
 */
export function encodeWithArray(
  key: string,
  items: readonly Buffer[],
  rest: object,
  head: object = {},
): EncodedJson {
  const before = JSON.stringify(head);
  const after = JSON.stringify(rest);
  const parts: Buffer[] = [
    Buffer.from(`${before === "{}" ? "{" : `${before.slice(0, -1)},`}${JSON.stringify(key)}:[`),
  ];
  items.forEach((item, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(item);
  });
  parts.push(Buffer.from(after === "{}" ? "]}" : `],${after.slice(1)}`));
  return new EncodedJson(parts);
}
