import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { pick, rng } from "../../bench/catalog/random.js";
import { findActiveByTaskAlias, retireListing, updateListing } from "../../shared/catalog/store/listings.js";
import { db } from "../../shared/db/knex.js";
import { availableToolIds } from "../../shared/tools/registry.js";
import { buildAgent, buildListing } from "../helpers/factories.js";

// listing_aliases, the table execute's task-alias lookup walks, kept by a trigger on listings: it must
// hold one row per active listing and form it answers to (slug, each tag, category, lowercase name),
// with the listing's current order keys and filters, whatever writes it; and the lookup over it must
// answer what the query over listings answered.

const URL = "http://127.0.0.1:9/invoke";

/** What listing_aliases must hold for a listing, derived from listings alone (sorted by alias). */
async function expectedAliases(id: string) {
  const { rows } = await db().raw(
    `select distinct a as alias, coalesce(a = l.slug, false) as exact, l.price_micros, l.created_at,
            l.tool_id, l.tumbler_enabled
       from listings l, unnest(array[l.slug, l.category, lower(l.name)] || l.tags) a
      where l.id = ? and l.status = 'active' and a is not null
      order by alias`,
    [id],
  );
  return rows;
}

async function actualAliases(id: string) {
  const { rows } = await db().raw(
    `select alias, exact, price_micros, created_at, tool_id, tumbler_enabled
       from listing_aliases where listing_id = ? order by alias`,
    [id],
  );
  return rows;
}

async function expectInSync(id: string, count: number): Promise<void> {
  const [expected, actual] = await Promise.all([expectedAliases(id), actualAliases(id)]);
  expect(actual).toEqual(expected);
  expect(actual).toHaveLength(count);
}

describe("listing_aliases stays in sync with listings", () => {
  it("follows create, change, retirement and rollback", async () => {
    const seller = await buildAgent("seller");
    const slug = `alias-${randomBytes(4).toString("hex")}`;
    const listing = await buildListing({
      endpointUrl: URL,
      sellerId: seller.agentId,
      slug,
      name: "Alias Probe",
      category: "nlp",
      // A tag equal to the category is one row, not two.
      tags: ["summarize", "nlp", "Mixed-Case"],
    });
    // slug, "alias probe", "nlp", "summarize", "Mixed-Case"
    await expectInSync(listing.id, 5);
    expect((await actualAliases(listing.id)).filter((r: { exact: boolean }) => r.exact)).toEqual([
      expect.objectContaining({ alias: slug }),
    ]);

    // A change through the store: name, tags, category and price reach the rows.
    const changed = await db().transaction((trx) =>
      updateListing(
        trx,
        listing,
        {
          name: "Renamed Probe",
          tags: ["translate"],
          category: "text",
          price_micros: 250_000n,
          version: "1.0.1",
        },
        seller.agentId,
      ),
    );
    await expectInSync(changed.id, 4);
    expect((await actualAliases(listing.id))[0].price_micros).toBe("250000");

    // A write that changes none of the forms or order keys leaves the rows as they were.
    await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    await expectInSync(listing.id, 4);

    await db()("listings").where({ id: listing.id }).update({ tumbler_enabled: true, tool_id: null });
    await expectInSync(listing.id, 4);

    // Rolled back with the writer's transaction.
    await db()
      .transaction(async (trx) => {
        await trx("listings")
          .where({ id: listing.id })
          .update({ tags: ["rolled-back"] });
        throw new Error("roll back");
      })
      .catch(() => undefined);
    await expectInSync(listing.id, 4);

    await retireListing(db(), listing.id);
    await expectInSync(listing.id, 0);
    await db()("listings").where({ id: listing.id }).update({ status: "active" });
    await expectInSync(listing.id, 4);
  });

  it("holds no row for a listing created retired, and loses its rows when the listing is deleted", async () => {
    const retired = await buildListing({ endpointUrl: URL, status: "retired" });
    await expectInSync(retired.id, 0);
    const active = await buildListing({ endpointUrl: URL, tags: ["one"] });
    await expectInSync(active.id, 4);
    await db()("listings").where({ id: active.id }).delete();
    expect(await actualAliases(active.id)).toEqual([]);
  });
});

/** The query findActiveByTaskAlias ran over listings before listing_aliases, with id as the last key. */
async function previousLookup(alias: string, tumblerOnly: boolean): Promise<string[]> {
  const { rows } = await db().raw(
    `select id from listings
      where status = 'active' and (not ?::boolean or tumbler_enabled)
        and (tool_id is null or tool_id = any(?::text[]))
        and (slug = ? or tags @> array[?]::text[] or category = ? or lower(name) = ?)
      order by (slug = ?) desc, price_micros asc, created_at asc, id
      limit 10`,
    [tumblerOnly, availableToolIds(), alias, alias, alias, alias, alias],
  );
  return rows.map((r: { id: string }) => r.id);
}

describe("the task-alias lookup over listing_aliases", () => {
  it("answers what the query over listings answered, for every form, with and without tumblerOnly", async () => {
    const rand = rng(4242);
    const ns = `al${randomBytes(3).toString("hex")}`;
    const words = ["parse", "scrape", "search", "summarize", "translate"].map((w) => `${ns}-${w}`);
    const categories = [`${ns}-docs`, `${ns}-web`];
    const slugs: string[] = [];
    for (let i = 0; i < 60; i++) {
      const slug = `${ns}-listing-${i}`;
      slugs.push(slug);
      const listing = await buildListing({
        endpointUrl: URL,
        slug,
        name: rand() < 0.3 ? pick(rand, words) : `${ns} tool ${i}`,
        category: pick(rand, categories),
        tags: [pick(rand, words), pick(rand, words)],
        // Prices repeat, so the created_at and id keys decide some places.
        price: pick(rand, [0, 0.01, 0.01, 0.05]),
        status: rand() < 0.15 ? "retired" : "active",
      });
      if (rand() < 0.4) await db()("listings").where({ id: listing.id }).update({ tumbler_enabled: true });
    }
    // More than ten cheaper listings tagged with another's slug: the exact slug still comes first.
    for (let i = 0; i < 11; i++) await buildListing({ endpointUrl: URL, tags: [slugs[17]!], price: 0 });
    await db()("listings").where({ slug: slugs[17] }).update({ status: "active", price_micros: 90_000 });
    let compared = 0;
    for (const alias of [...words, ...categories, slugs[3]!, slugs[17]!, `${ns} tool 5`, `${ns}-none`]) {
      for (const tumblerOnly of [false, true]) {
        const now = (await findActiveByTaskAlias(db(), alias, { tumblerOnly })).map((r) => r.id);
        expect(now, `${alias} tumblerOnly=${tumblerOnly}`).toEqual(await previousLookup(alias, tumblerOnly));
        compared += now.length;
      }
    }
    expect(compared).toBeGreaterThan(100);
  });
});
