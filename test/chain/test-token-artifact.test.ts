import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  TEST_TOKEN_ABI,
  TEST_TOKEN_BYTECODE,
  TEST_TOKEN_SOLC_VERSION,
  TEST_TOKEN_SOURCE_SHA256,
} from "../../shared/chain/test-token-artifact.js";

interface CompiledToken {
  abi: unknown[];
  bytecode: string;
  solcVersion: string;
  sourceSha256: string;
}

// The build script is plain JavaScript outside the TypeScript project; importing it through a computed
// URL keeps tsc from resolving it, and means the test compiles with exactly the script's settings.
const buildScriptUrl = new URL("../../scripts/build-contracts.mjs", import.meta.url).href;
const sourcePath = new URL("../../contracts/TestUSDC.sol", import.meta.url);
const REBUILD = "contracts/TestUSDC.sol changed without a rebuild: run `npm run build:contracts`";

describe("the committed TestUSDC artifact", () => {
  it("records the sha256 of the current source", () => {
    const sha256 = createHash("sha256").update(readFileSync(sourcePath)).digest("hex");
    expect(TEST_TOKEN_SOURCE_SHA256, REBUILD).toBe(sha256);
  });

  it("is what the source compiles to", { timeout: 60_000 }, async () => {
    const { compileTestToken } = (await import(buildScriptUrl)) as { compileTestToken(): CompiledToken };
    const compiled = compileTestToken();
    expect(compiled.solcVersion).toBe(TEST_TOKEN_SOLC_VERSION);
    expect(TEST_TOKEN_ABI, REBUILD).toEqual(compiled.abi);
    expect(TEST_TOKEN_BYTECODE, REBUILD).toBe(compiled.bytecode);
  });
});
