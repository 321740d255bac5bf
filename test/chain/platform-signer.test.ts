import { privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, it } from "vitest";
import { platformAddress, platformSigner } from "../../shared/chain/client.js";
import { getConfig, overrideConfig } from "../../shared/config.js";

// The platform account is derived from PLATFORM_SIGNER_KEY once per key (the paid gate asks for it on
// every paid call), and a replaced key is never answered with the old account.

const before = getConfig();
afterAll(() => {
  overrideConfig(before);
});

const KEY_A = `0x${"11".repeat(32)}` as const;
const KEY_B = `0x${"22".repeat(32)}` as const;

describe("platformSigner", () => {
  it("derives the account once per key and follows a replaced key", () => {
    overrideConfig({ platformSignerKey: KEY_A, platformAddress: undefined });
    const first = platformSigner();
    expect(first?.address).toBe(privateKeyToAccount(KEY_A).address);
    expect(platformSigner()).toBe(first);
    expect(platformAddress()).toBe(first?.address);

    overrideConfig({ platformSignerKey: KEY_B });
    expect(platformSigner()?.address).toBe(privateKeyToAccount(KEY_B).address);
    expect(platformAddress()).toBe(privateKeyToAccount(KEY_B).address);

    overrideConfig({ platformSignerKey: undefined });
    expect(platformSigner()).toBeUndefined();
    expect(platformAddress()).toBeUndefined();
  });
});
