import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hash,
  type Hex,
  http,
  type PrivateKeyAccount,
  type PublicClient,
  toHex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { TEST_TOKEN_ABI, TEST_TOKEN_BYTECODE } from "./test-token-artifact.js";

// A throwaway EVM for tests and the dev chain: Hardhat 2's in-process network (EDR) behind a real
// JSON-RPC server on loopback, with our TestUSDC deployed, so the service and viem talk HTTP to it
// exactly as they talk to Base.
//
// Why Hardhat's internal modules and not `require("hardhat")`: the package entry point builds the
// Hardhat runtime environment, which looks for a hardhat.config.* from the process's working directory
// and throws outside a Hardhat project; it is also a per-process singleton. The network provider
// (createHardhatNetworkProvider) and the JSON-RPC request handler underneath it take their settings as
// arguments, so this module needs no config file, works from any cwd, and gets a fresh, independent chain
// on every start. These are the same calls `hardhat node` makes (its `node:create-server` subtask wraps
// the handler in an HTTP server); the paths are pinned by the exact hardhat version in package-lock.

export const LOCAL_CHAIN_ID = 31337;

const ONE_ETH = 10n ** 18n;
const MINTER_ETH = 10_000n * ONE_ETH;
// Automine makes every transaction its own block; a receipt is there by the time we first ask.
const POLLING_INTERVAL_MS = 50;

export interface LocalWallet {
  address: Address;
  privateKey: Hex;
  account: PrivateKeyAccount;
}

export interface LocalChain {
  /** http://127.0.0.1:<port> — a real JSON-RPC server. */
  rpcUrl: string;
  chainId: number;
  /** TestUSDC, deployed at start by the minter. */
  tokenAddress: Address;
  /** The deployer and the token's minter: a fresh random key per start, funded with ETH. */
  minter: { address: Address; privateKey: Hex };
  /** Mints test USDC and waits for the receipt. */
  mint(to: Address, amountMicros: bigint): Promise<Hash>;
  /** Sets the ETH balance of `to` to exactly `wei` (hardhat_setBalance; it does not add). */
  fundEth(to: Address, wei: bigint): Promise<void>;
  /** Mines `blocks` empty blocks (default 1) without moving chain time ahead of the wall clock. */
  mine(blocks?: number): Promise<void>;
  /** A random key funded with gas ETH (default 1 ETH) and, when asked, test USDC. */
  newWallet(opts?: { usdcMicros?: bigint; eth?: bigint }): Promise<LocalWallet>;
  publicClient: PublicClient;
  /** Closes the HTTP server and stops interval mining; idempotent. */
  stop(): Promise<void>;
}

export interface LocalChainOptions {
  /** 0 (the default) lets the OS pick a free port; read it back from rpcUrl. */
  port?: number;
  host?: "127.0.0.1";
  /** Also mine a block every N ms, so confirmation counts progress without traffic. */
  intervalMiningMs?: number;
}

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

/** Starts a fresh local chain with TestUSDC deployed; call stop() when done. */
export async function startLocalChain(opts: LocalChainOptions = {}): Promise<LocalChain> {
  const provider = await createProvider(opts.intervalMiningMs ?? 0);
  const server = await serveJsonRpc(provider, opts.port ?? 0);
  const { port } = server.address() as AddressInfo;
  const rpcUrl = `http://127.0.0.1:${port}`;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    try {
      await provider.request({ method: "evm_setIntervalMining", params: [0] });
    } finally {
      await closeServer(server);
    }
  };

  try {
    const chain = localChainDefinition(rpcUrl);
    const transport = http(rpcUrl, { retryCount: 0 });
    const publicClient: PublicClient = createPublicClient({
      chain,
      transport,
      pollingInterval: POLLING_INTERVAL_MS,
    });
    const minterKey = generatePrivateKey();
    const minterAccount = privateKeyToAccount(minterKey);
    const minterClient = createWalletClient({
      account: minterAccount,
      chain,
      transport,
      pollingInterval: POLLING_INTERVAL_MS,
    });
    const setBalance = async (to: Address, wei: bigint): Promise<void> => {
      await provider.request({ method: "hardhat_setBalance", params: [to, toHex(wei)] });
    };

    // The minter's transactions go one at a time: concurrent callers would otherwise read the same
    // pending nonce and one of the two transactions would be rejected.
    let minterQueue: Promise<unknown> = Promise.resolve();
    const asMinter = <T>(send: () => Promise<T>): Promise<T> => {
      const result = minterQueue.then(send);
      minterQueue = result.catch(() => undefined);
      return result;
    };

    await setBalance(minterAccount.address, MINTER_ETH);
    const deployHash = await minterClient.deployContract({
      abi: TEST_TOKEN_ABI,
      bytecode: TEST_TOKEN_BYTECODE,
    });
    const deployed = await publicClient.waitForTransactionReceipt({ hash: deployHash });
    if (deployed.status !== "success" || !deployed.contractAddress) {
      throw new Error(`TestUSDC deployment failed in transaction ${deployHash}`);
    }
    const tokenAddress = deployed.contractAddress;

    const mint = (to: Address, amountMicros: bigint): Promise<Hash> =>
      asMinter(async () => {
        const hash = await minterClient.writeContract({
          address: tokenAddress,
          abi: TEST_TOKEN_ABI,
          functionName: "mint",
          args: [to, amountMicros],
        });
        const receipt = await publicClient.waitForTransactionReceipt({ hash });
        if (receipt.status !== "success") throw new Error(`mint reverted in transaction ${hash}`);
        return hash;
      });

    return {
      rpcUrl,
      chainId: LOCAL_CHAIN_ID,
      tokenAddress,
      minter: { address: minterAccount.address, privateKey: minterKey },
      mint,
      fundEth: setBalance,
      async mine(blocks = 1) {
        // Interval 0 keeps the new blocks at the current time; hardhat_mine's default of one second per
        // block would push chain time ahead of the wall clock, and the x402 facilitator checks
        // authorization windows against the wall clock while the token checks block.timestamp.
        await provider.request({ method: "hardhat_mine", params: [toHex(blocks), "0x0"] });
      },
      async newWallet(walletOpts = {}) {
        const privateKey = generatePrivateKey();
        const account = privateKeyToAccount(privateKey);
        await setBalance(account.address, walletOpts.eth ?? ONE_ETH);
        if (walletOpts.usdcMicros !== undefined && walletOpts.usdcMicros > 0n) {
          await mint(account.address, walletOpts.usdcMicros);
        }
        return { address: account.address, privateKey, account };
      },
      publicClient,
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

function localChainDefinition(rpcUrl: string): Chain {
  return defineChain({
    id: LOCAL_CHAIN_ID,
    name: "Local Hardhat",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    testnet: true,
  });
}

// Loaded on first start only, so code that merely imports this module (the launcher without DEV_CHAIN)
// does not pay for Hardhat; internal paths can move between Hardhat releases, hence the pointed message.
async function importHardhat<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new Error(
      `the local chain needs Hardhat 2's network modules (hardhat/internal/hardhat-network/*, present in ` +
        `hardhat@2.29); is hardhat@2 installed? ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

async function createProvider(intervalMiningMs: number): Promise<Eip1193> {
  const { createHardhatNetworkProvider } = await importHardhat(
    () => import("hardhat/internal/hardhat-network/provider/provider.js"),
  );
  return createHardhatNetworkProvider(
    {
      // Hardhat 2.29's default hardfork; TestUSDC is compiled for cancun, which osaka includes.
      hardfork: "osaka",
      chainId: LOCAL_CHAIN_ID,
      networkId: LOCAL_CHAIN_ID,
      blockGasLimit: 60_000_000,
      minGasPrice: 0n,
      initialBaseFeePerGas: 1_000_000_000,
      automine: true,
      intervalMining: intervalMiningMs,
      mempoolOrder: "priority",
      // Per-chain hardfork history only matters when forking a public chain, which we never do.
      chains: new Map(),
      // No dev accounts: every key is random per start (see minter and newWallet), so parallel test
      // files sharing one database never produce identical transaction hashes.
      genesisAccounts: [],
      allowUnlimitedContractSize: false,
      // A reverted transaction is mined with status 0, as on a real chain, instead of failing the RPC.
      throwOnTransactionFailures: false,
      // But a reverting eth_call must fail as it does on a real node: with `false` Hardhat returns the
      // revert data as if it were the result, and viem cannot decode the reason (simulateContract).
      throwOnCallFailures: true,
      // Blocks take the wall-clock time even when several are mined within a second. Otherwise every
      // automined transaction adds a second and a busy test drifts minutes ahead of the wall clock,
      // which the x402 facilitator (wall clock) and the token (block.timestamp) would then disagree on.
      allowBlocksWithSameTimestamp: true,
      enableTransientStorage: false,
      enableRip7212: false,
    },
    { enabled: false },
  );
}

/**
 * Reports a revert the way geth does (error code 3, "execution reverted", the revert data in `data`).
 * Hardhat answers a reverting eth_call / eth_estimateGas with -32603 "Internal error", which viem's HTTP
 * transport treats as transient and retries with backoff: about a second lost on every expected revert,
 * and a failure shape no production node has.
 */
function withGethStyleReverts(provider: Eip1193): Eip1193 {
  return {
    async request(args) {
      try {
        return await provider.request(args);
      } catch (error) {
        const { data, message, _isProviderError } = (error ?? {}) as {
          data?: unknown;
          message?: string;
          _isProviderError?: boolean;
        };
        const isRevert = _isProviderError !== true && typeof data === "string" && /^0x[0-9a-f]*$/i.test(data);
        if (!isRevert) throw error;
        // _isProviderError makes Hardhat's handler pass code, message and data through unchanged.
        throw Object.assign(new Error(`execution reverted: ${message}`), {
          code: 3,
          data,
          _isProviderError: true,
        });
      }
    },
  };
}

async function serveJsonRpc(provider: Eip1193, port: number): Promise<Server> {
  const { JsonRpcHandler } = await importHardhat(
    () => import("hardhat/internal/hardhat-network/jsonrpc/handler.js"),
  );
  // The handler's type wants Hardhat's full EIP1193Provider (with the legacy send/sendAsync); it only
  // ever calls request().
  const handler = new JsonRpcHandler(
    withGethStyleReverts(provider) as ConstructorParameters<typeof JsonRpcHandler>[0],
  );
  const server = createServer((req, res) => void handler.handleHttp(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}

async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve, reject) =>
    server.close((err) => (err ? reject(err) : resolve())),
  );
  // close() waits for open keep-alive sockets (viem's fetch keeps them); nothing useful is in flight.
  server.closeAllConnections();
  await closed;
}
