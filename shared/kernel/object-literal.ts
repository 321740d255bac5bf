// Functions that return one object literal, made at run time for keys known only then (a statement's
// columns, a record's field names) but repeated on every call. V8 builds such a literal whole, with one
// shape for every object it returns; an object filled key by key, or made with a computed key, is built
// one property at a time (and pg's rows end in dictionary mode). Used by shared/db/row-shape.ts and the
// listing record's fields (shared/catalog/listing-record/values.ts).

/**
 * A function of `parameters` returning `{ name: expression, … }` in the order given. Each name goes in
 * as a JSON string literal, so any name is a valid key and none is code; the expressions are the
 * caller's own code over the parameters, never data. `__proto__` is refused: in a literal it would set
 * the object's prototype instead of a key.
 */
export function objectLiteralFunction<F extends (...args: never[]) => Record<string, unknown>>(
  parameters: readonly string[],
  properties: readonly (readonly [name: string, expression: string])[],
): F {
  if (properties.some(([name]) => name === "__proto__"))
    throw new Error("objectLiteralFunction: __proto__ is not a property name a literal can hold");
  const body = properties.map(([name, expression]) => `${JSON.stringify(name)}: ${expression}`).join(", ");
  return new Function(...parameters, `return {${body}};`) as F;
}
