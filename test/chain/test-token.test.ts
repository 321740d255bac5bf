import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  domainSeparator,
  type Hex,
  type LocalAccount,
  parseEventLogs,
  parseSignature,
  type TransactionReceipt,
  toHex,
} from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_TOKEN_ABI } from "../../shared/chain/test-token-artifact.js";
import {
  LOCAL_CHAIN_ID,
  type LocalChain,
  type LocalWallet,
  localWalletClient,
  signTransferAuthorization,
  startLocalChain,
} from "../helpers/chain.js";

// secp256k1 group order: n - s is the high-s twin of a valid signature.
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let chain: LocalChain;

beforeAll(async () => {
  chain = await startLocalChain();
});

afterAll(async () => {
  await chain?.stop();
});

function walletClient(account: LocalAccount) {
  return localWalletClient(chain, account);
}

async function balanceOf(address: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: TEST_TOKEN_ABI,
    functionName: "balanceOf",
    args: [address],
  });
}

async function nowSeconds(): Promise<bigint> {
  return (await chain.publicClient.getBlock()).timestamp;
}

async function expectRevert(action: Promise<unknown>, reason: string): Promise<void> {
  const error = await action.then(
    () => expect.unreachable(`expected a revert with "${reason}"`),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BaseError);
  const reverted = (error as BaseError).walk((e) => e instanceof ContractFunctionRevertedError);
  expect(reverted, String(error)).toBeInstanceOf(ContractFunctionRevertedError);
  expect((reverted as ContractFunctionRevertedError).reason).toBe(reason);
}

async function mined(hash: Hex): Promise<TransactionReceipt> {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return receipt;
}

function authorizationArgs(a: {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}) {
  return [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce] as const;
}

/** A payer holding 10 USDC, a payee, and a relayer that submits (and pays gas for) the authorization. */
async function parties(): Promise<{ payer: LocalWallet; payee: LocalWallet; relayer: LocalWallet }> {
  const [payer, payee, relayer] = await Promise.all([
    chain.newWallet({ usdcMicros: 10_000_000n }),
    chain.newWallet(),
    chain.newWallet(),
  ]);
  return { payer, payee, relayer };
}

describe("TestUSDC", () => {
  it("is deployed with USDC's metadata and EIP-712 domain", async () => {
    const read = <F extends "name" | "symbol" | "decimals" | "version" | "DOMAIN_SEPARATOR" | "minter">(
      functionName: F,
    ) => chain.publicClient.readContract({ address: chain.tokenAddress, abi: TEST_TOKEN_ABI, functionName });
    expect(chain.chainId).toBe(LOCAL_CHAIN_ID);
    expect(await chain.publicClient.getChainId()).toBe(LOCAL_CHAIN_ID);
    expect(chain.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await read("name")).toBe("USD Coin");
    expect(await read("symbol")).toBe("USDC");
    expect(await read("decimals")).toBe(6);
    expect(await read("version")).toBe("2");
    expect(await read("minter")).toBe(chain.minter.address);
    expect(await read("DOMAIN_SEPARATOR")).toBe(
      domainSeparator({
        domain: {
          name: "USD Coin",
          version: "2",
          chainId: LOCAL_CHAIN_ID,
          verifyingContract: chain.tokenAddress,
        },
      }),
    );
  });

  it("lets only the minter mint", async () => {
    const holder = await chain.newWallet();
    const supplyBefore = await chain.publicClient.readContract({
      address: chain.tokenAddress,
      abi: TEST_TOKEN_ABI,
      functionName: "totalSupply",
    });
    await mined(await chain.mint(holder.address, 2_500_000n));
    expect(await balanceOf(holder.address)).toBe(2_500_000n);
    const supplyAfter = await chain.publicClient.readContract({
      address: chain.tokenAddress,
      abi: TEST_TOKEN_ABI,
      functionName: "totalSupply",
    });
    expect(supplyAfter - supplyBefore).toBe(2_500_000n);

    await expectRevert(
      walletClient(holder.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "mint",
        args: [holder.address, 1n],
      }),
      "TestUSDC: caller is not the minter",
    );
  });

  it("mines a reverting transaction with status reverted instead of failing the RPC", async () => {
    const outsider = await chain.newWallet();
    // An explicit gas limit skips estimation, so the transaction reaches the chain as on a real node.
    const hash = await walletClient(outsider.account).writeContract({
      address: chain.tokenAddress,
      abi: TEST_TOKEN_ABI,
      functionName: "mint",
      args: [outsider.address, 1n],
      gas: 100_000n,
    });
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe("reverted");
  });

  it("settles transferWithAuthorization in the bytes-signature form and emits Transfer and AuthorizationUsed", async () => {
    const { payer, payee, relayer } = await parties();
    const { authorization, signature } = await signTransferAuthorization({
      account: payer.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 1_250_000n,
    });
    const receipt = await mined(
      await walletClient(relayer.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "transferWithAuthorization",
        args: [...authorizationArgs(authorization), signature],
      }),
    );

    expect(await balanceOf(payer.address)).toBe(8_750_000n);
    expect(await balanceOf(payee.address)).toBe(1_250_000n);
    const events = parseEventLogs({ abi: TEST_TOKEN_ABI, logs: receipt.logs });
    expect(events.map((e) => e.eventName)).toEqual(["AuthorizationUsed", "Transfer"]);
    expect(events).toContainEqual(
      expect.objectContaining({
        eventName: "Transfer",
        args: { from: payer.address, to: payee.address, value: 1_250_000n },
      }),
    );
    expect(events).toContainEqual(
      expect.objectContaining({
        eventName: "AuthorizationUsed",
        args: { authorizer: payer.address, nonce: authorization.nonce },
      }),
    );
  });

  it("settles transferWithAuthorization in the v, r, s form", async () => {
    const { payer, payee, relayer } = await parties();
    const { authorization, signature } = await signTransferAuthorization({
      account: payer.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 3_000_000n,
    });
    const { v, r, s } = parseSignature(signature);
    const receipt = await mined(
      await walletClient(relayer.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "transferWithAuthorization",
        args: [...authorizationArgs(authorization), Number(v), r, s],
      }),
    );

    expect(await balanceOf(payee.address)).toBe(3_000_000n);
    expect(parseEventLogs({ abi: TEST_TOKEN_ABI, logs: receipt.logs }).map((e) => e.eventName)).toEqual([
      "AuthorizationUsed",
      "Transfer",
    ]);
  });

  it("refuses a replayed authorization and reports its nonce as used", async () => {
    const { payer, payee, relayer } = await parties();
    const { authorization, signature } = await signTransferAuthorization({
      account: payer.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 1_000_000n,
    });
    const authorizationState = () =>
      chain.publicClient.readContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "authorizationState",
        args: [payer.address, authorization.nonce],
      });
    const submit = () =>
      walletClient(relayer.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "transferWithAuthorization",
        args: [...authorizationArgs(authorization), signature],
      });

    expect(await authorizationState()).toBe(false);
    await mined(await submit());
    expect(await authorizationState()).toBe(true);
    await expectRevert(submit(), "FiatTokenV2: authorization is used or canceled");
    expect(await balanceOf(payee.address)).toBe(1_000_000n);
  });

  it("refuses expired and not-yet-valid authorizations", async () => {
    const { payer, payee, relayer } = await parties();
    const now = await nowSeconds();
    const token = { address: chain.tokenAddress, chainId: chain.chainId };
    const submit = async (window: { validAfter: bigint; validBefore: bigint }) => {
      const { authorization, signature } = await signTransferAuthorization({
        account: payer.account,
        token,
        to: payee.address,
        valueMicros: 1n,
        ...window,
      });
      return walletClient(relayer.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "transferWithAuthorization",
        args: [...authorizationArgs(authorization), signature],
      });
    };

    await expectRevert(
      submit({ validAfter: 0n, validBefore: now - 1n }),
      "FiatTokenV2: authorization is expired",
    );
    await expectRevert(
      submit({ validAfter: now + 3600n, validBefore: now + 7200n }),
      "FiatTokenV2: authorization is not yet valid",
    );
    expect(await balanceOf(payee.address)).toBe(0n);
  });

  it("refuses a signature made by another key, and the high-s twin of a valid one", async () => {
    const { payer, payee, relayer } = await parties();
    const intruder = await chain.newWallet();
    const signed = await signTransferAuthorization({
      account: intruder.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 5_000_000n,
    });
    const submit = (args: readonly unknown[]) =>
      walletClient(relayer.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "transferWithAuthorization",
        args: args as never,
      });
    // The intruder's signature over a transfer out of the payer's balance.
    await expectRevert(
      submit([...authorizationArgs({ ...signed.authorization, from: payer.address }), signed.signature]),
      "FiatTokenV2: invalid signature",
    );

    const genuine = await signTransferAuthorization({
      account: payer.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 5_000_000n,
    });
    const { r, s, yParity } = parseSignature(genuine.signature);
    const twinS = toHex(SECP256K1_N - BigInt(s), { size: 32 });
    const twinV = yParity === 0 ? 28 : 27;
    await expectRevert(
      submit([...authorizationArgs(genuine.authorization), twinV, r, twinS]),
      "ECRecover: invalid signature 's' value",
    );
    expect(await balanceOf(payer.address)).toBe(10_000_000n);
  });

  it("lets only the payee submit receiveWithAuthorization", async () => {
    const { payer, payee, relayer } = await parties();
    const { authorization, signature } = await signTransferAuthorization({
      account: payer.account,
      token: { address: chain.tokenAddress, chainId: chain.chainId },
      to: payee.address,
      valueMicros: 2_000_000n,
      kind: "receive",
    });
    const submitAs = (sender: LocalWallet) =>
      walletClient(sender.account).writeContract({
        address: chain.tokenAddress,
        abi: TEST_TOKEN_ABI,
        functionName: "receiveWithAuthorization",
        args: [...authorizationArgs(authorization), signature],
      });

    await expectRevert(submitAs(relayer), "FiatTokenV2: caller must be the payee");
    await mined(await submitAs(payee));
    expect(await balanceOf(payee.address)).toBe(2_000_000n);
  });

  it("gives every new wallet its own key, gas ETH and the USDC asked for, even when created at once", async () => {
    const wallets = await Promise.all([
      chain.newWallet(),
      chain.newWallet({ usdcMicros: 7n }),
      chain.newWallet({ eth: 5n * 10n ** 18n, usdcMicros: 9n }),
    ]);
    expect(new Set(wallets.map((w) => w.address)).size).toBe(3);
    expect(new Set([...wallets.map((w) => w.address), chain.minter.address]).size).toBe(4);
    for (const w of wallets) expect(w.account.address).toBe(w.address);
    expect(await chain.publicClient.getBalance({ address: wallets[0]!.address })).toBe(10n ** 18n);
    expect(await chain.publicClient.getBalance({ address: wallets[2]!.address })).toBe(5n * 10n ** 18n);
    // Two mints were in flight at once: the minter's transactions must not have clashed on a nonce.
    expect(await balanceOf(wallets[1]!.address)).toBe(7n);
    expect(await balanceOf(wallets[2]!.address)).toBe(9n);
    expect(await balanceOf(wallets[0]!.address)).toBe(0n);
  });
});

describe("startLocalChain", () => {
  it("starts, stops and starts again in one process, each time with a fresh chain", async () => {
    const first = await startLocalChain();
    const second = await startLocalChain({ intervalMiningMs: 50 });
    expect(second.rpcUrl).not.toBe(first.rpcUrl);
    expect(second.minter.address).not.toBe(first.minter.address);
    await first.stop();
    await first.stop();
    await expect(first.publicClient.getBlockNumber()).rejects.toThrow();

    // The second chain is unaffected by the first one stopping, and interval mining moves it on alone.
    const startBlock = await second.publicClient.getBlockNumber();
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await second.publicClient.getBlockNumber()).toBeGreaterThan(startBlock);
    await second.stop();

    const third = await startLocalChain();
    try {
      const wallet = await third.newWallet({ usdcMicros: 1_000n });
      expect(
        await third.publicClient.readContract({
          address: third.tokenAddress,
          abi: TEST_TOKEN_ABI,
          functionName: "balanceOf",
          args: [wallet.address],
        }),
      ).toBe(1_000n);
    } finally {
      await third.stop();
    }
  });

  it("mines blocks on request without running chain time ahead of the wall clock", async () => {
    const before = await chain.publicClient.getBlock();
    await chain.mine(20);
    const after = await chain.publicClient.getBlock();
    expect(after.number - before.number).toBe(20n);
    expect(after.timestamp).toBeLessThanOrEqual(BigInt(Math.ceil(Date.now() / 1000)));
  });
});
