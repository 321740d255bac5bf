import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { generateApiKey, hashApiKey, isWellFormedApiKey } from "../../shared/identity/api-keys.js";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

describe("generateApiKey", () => {
  it("is amk_ followed by 38 base62 characters", () => {
    for (let i = 0; i < 50; i++) expect(generateApiKey()).toMatch(/^amk_[0-9A-Za-z]{38}$/);
  });

  it("generates well-formed keys", () => {
    for (let i = 0; i < 200; i++) expect(isWellFormedApiKey(generateApiKey())).toBe(true);
  });

  it("never repeats across 1000 generations and uses the whole alphabet", () => {
    const keys = Array.from({ length: 1000 }, generateApiKey);
    expect(new Set(keys).size).toBe(1000);
    const seen = new Set(keys.flatMap((k) => [...k.slice(4, 36)]));
    expect(seen.size).toBe(62);
  });
});

describe("isWellFormedApiKey", () => {
  it("is false when any single character after the prefix is changed (the checksum catches typos)", () => {
    for (let n = 0; n < 3; n++) {
      const key = generateApiKey();
      for (let i = 4; i < key.length; i++) {
        for (const replacement of ALPHABET) {
          if (replacement === key[i]) continue;
          const typo = key.slice(0, i) + replacement + key.slice(i + 1);
          expect(isWellFormedApiKey(typo), `${typo} (position ${i})`).toBe(false);
        }
      }
    }
  });

  it("is false for two swapped adjacent body characters", () => {
    const key = generateApiKey();
    for (let i = 4; i < 35; i++) {
      if (key[i] === key[i + 1]) continue;
      const swapped = key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2);
      expect(isWellFormedApiKey(swapped)).toBe(false);
    }
  });

  it.each([
    ["another prefix", (k: string) => `amx_${k.slice(4)}`],
    ["an upper-case prefix", (k: string) => `AMK_${k.slice(4)}`],
    ["no prefix", (k: string) => k.slice(4)],
    ["one character short", (k: string) => k.slice(0, -1)],
    ["one character too many", (k: string) => `${k}0`],
    ["a non-base62 character", (k: string) => `${k.slice(0, 10)}-${k.slice(11)}`],
    ["surrounding whitespace", (k: string) => ` ${k} `],
    ["the empty string", () => ""],
  ])("is false for %s", (_name, mangle) => {
    expect(isWellFormedApiKey(mangle(generateApiKey()))).toBe(false);
  });
});

describe("hashApiKey", () => {
  it("is the lower-case hex SHA-256 of the whole token", () => {
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const key = generateApiKey();
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashApiKey(key)).toBe(createHash("sha256").update(key).digest("hex"));
    expect(hashApiKey(key)).toBe(hashApiKey(key));
  });

  it("differs for different keys", () => {
    const hashes = Array.from({ length: 1000 }, () => hashApiKey(generateApiKey()));
    expect(new Set(hashes).size).toBe(1000);
  });
});
