import { type Static, Type } from "@sinclair/typebox";

/** A snippet is cut to this many characters. */
export const SNIPPET_MAX_CHARS = 500;

/** Web search input (spec "Tool services"). */
export const SearchInput = Type.Object(
  {
    query: Type.String({ minLength: 1, maxLength: 400 }),
    max_results: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, default: 5 })),
  },
  { additionalProperties: false },
);
export type SearchInputT = Static<typeof SearchInput>;

export const SearchResult = Type.Object({
  title: Type.String(),
  url: Type.String(),
  snippet: Type.String({ maxLength: SNIPPET_MAX_CHARS }),
  published_at: Type.Union([Type.String(), Type.Null()]),
});
export type SearchResultT = Static<typeof SearchResult>;

export const SearchOutput = Type.Object(
  {
    query: Type.String(),
    provider: Type.String(),
    results: Type.Array(SearchResult, { maxItems: 10 }),
  },
  { additionalProperties: true },
);
export type SearchOutputT = Static<typeof SearchOutput>;
