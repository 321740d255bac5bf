import { type Static, Type } from "@sinclair/typebox";

export const SCRAPE_FORMATS = ["markdown", "html", "links"] as const;
export type ScrapeFormat = (typeof SCRAPE_FORMATS)[number];
/** Most links returned, whatever max_length allows. */
export const SCRAPE_MAX_LINKS = 500;

/** Page scrape input (spec "Tool services"). */
export const ScrapeInput = Type.Object(
  {
    url: Type.String({
      minLength: 8,
      maxLength: 2048,
      pattern: "^[Hh][Tt][Tt][Pp][Ss]?://",
      description: "a public http(s) URL; loopback, private and internal hosts are refused",
    }),
    formats: Type.Optional(
      Type.Array(Type.Union(SCRAPE_FORMATS.map((f) => Type.Literal(f))), {
        minItems: 1,
        maxItems: 3,
        uniqueItems: true,
        default: ["markdown"],
      }),
    ),
    only_main_content: Type.Optional(Type.Boolean({ default: true })),
    max_length: Type.Optional(
      Type.Integer({ minimum: 1000, maximum: 100000, default: 50000, description: "characters per format" }),
    ),
  },
  { additionalProperties: false },
);
export type ScrapeInputT = Static<typeof ScrapeInput>;

export const ScrapeOutput = Type.Object(
  {
    url: Type.String(),
    final_url: Type.String(),
    title: Type.Union([Type.String(), Type.Null()]),
    markdown: Type.Optional(Type.String()),
    html: Type.Optional(Type.String()),
    links: Type.Optional(Type.Array(Type.String())),
    truncated: Type.Boolean(),
    main_content_found: Type.Boolean(),
    provider: Type.String(),
  },
  { additionalProperties: true },
);
export type ScrapeOutputT = Static<typeof ScrapeOutput>;
