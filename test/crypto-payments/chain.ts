/**
 * A real local EVM for the crypto tests: Hardhat 2's in-process network behind its JSON-RPC HTTP
 * server on an ephemeral port (so Kassa talks to it exactly as to a node, over viem's http
 * transport), and the committed 6-decimal TestToken artifact (no compiler at test time).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPublicClient, createWalletClient, encodeFunctionData, getAddress, http, type Abi } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifact = JSON.parse(readFileSync(path.join(here, 'fixtures/TestToken.json'), 'utf8')) as { abi: Abi; bytecode: `0x${string}` };

export interface LocalChain {
  url: string;
  chainId: number;
  /** Unlocked accounts: [0] deployer, then buyers and merchants. */
  accounts: `0x${string}`[];
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  deployToken(name: string, symbol: string): Promise<`0x${string}`>;
  mint(token: `0x${string}`, to: `0x${string}`, units: bigint): Promise<`0x${string}`>;
  transfer(token: `0x${string}`, from: `0x${string}`, to: `0x${string}`, units: bigint): Promise<`0x${string}`>;
  transferTwice(token: `0x${string}`, from: `0x${string}`, a: [`0x${string}`, bigint], b: [`0x${string}`, bigint]): Promise<`0x${string}`>;
  /** A transfer signed offline by account `index` (Hardhat's default mnemonic): the same bytes can be broadcast again after a revert. */
  signTransfer(token: `0x${string}`, index: number, to: `0x${string}`, units: bigint): Promise<`0x${string}`>;
  sendRaw(raw: `0x${string}`): Promise<`0x${string}`>;
  mine(blocks?: number): Promise<void>;
  blockNumber(): Promise<number>;
  snapshot(): Promise<string>;
  revert(id: string): Promise<void>;
  increaseTime(seconds: number): Promise<void>;
  /** Sends a transfer from an unlocked account without waiting for it to be mined (with automine off, several share a block). */
  submitTransfer(token: `0x${string}`, from: `0x${string}`, to: `0x${string}`, units: bigint): Promise<`0x${string}`>;
  /** Turns Hardhat's one-block-per-transaction mining on or off. */
  setAutomine(on: boolean): Promise<void>;
  close(): Promise<void>;
}

export interface LocalChainOptions {
  /**
   * The chain's genesis time (ISO 8601); default the config's 2026-11-22T09:00Z, which matches the
   * test harness's ManualClock. Kassa child processes run on the real clock: pass the current time,
   * or quotes (valid from their issue time) would not match the block times. Honoured by the first
   * chain a process starts (Hardhat's network is created once per process).
   */
  initialDate?: string;
  /**
   * Told of every JSON-RPC request the HTTP server receives (what Kassa asked the node); the node
   * answers once the returned promise (if any) settles, so a test can hold a request back.
   */
  onRequest?: (method: string, params: unknown[]) => void | Promise<void>;
}

/** CRYPTO_CHAINS for a Kassa deployment watching this chain, with `token` as its USDC. */
export function cryptoChainsEnv(chain: LocalChain, token: `0x${string}`, settings: { confirmations: number; blockRange: number; initialLookback?: number }): string {
  return JSON.stringify([
    {
      chainId: chain.chainId,
      name: 'Hardhat',
      rpcUrl: chain.url,
      confirmations: settings.confirmations,
      explorerUrl: 'https://explorer.test',
      blockRange: settings.blockRange,
      initialLookback: settings.initialLookback ?? 1000,
      tokens: { USDC: token },
    },
  ]);
}

export async function startLocalChain(options: LocalChainOptions = {}): Promise<LocalChain> {
  process.env.HARDHAT_CONFIG = path.join(here, 'hardhat.config.cjs');
  const hre = ((await import('hardhat')) as unknown as { default: any }).default;
  const { TASK_NODE_CREATE_SERVER } = (await import('hardhat/builtin-tasks/task-names.js')) as unknown as { TASK_NODE_CREATE_SERVER: string };
  // The provider is created lazily, from this config, on its first request.
  if (options.initialDate) hre.config.networks.hardhat.initialDate = options.initialDate;
  const onRequest = options.onRequest;
  const served = onRequest
    ? new Proxy(hre.network.provider, {
        get(target, prop) {
          if (prop === 'request') {
            return async (args: { method: string; params?: unknown[] }) => {
              await onRequest(args.method, args.params ?? []);
              return target.request(args);
            };
          }
          const value = Reflect.get(target, prop);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      })
    : hre.network.provider;
  const server = await hre.run(TASK_NODE_CREATE_SERVER, { hostname: '127.0.0.1', port: 0, provider: served });
  const { port } = (await server.listen()) as { port: number };
  const url = `http://127.0.0.1:${port}`;
  const transport = http(url, { retryCount: 0 });
  const pub = createPublicClient({ transport });
  const rpc = <T>(method: string, params: unknown[] = []) => hre.network.provider.request({ method, params }) as Promise<T>;
  const accounts = ((await rpc<string[]>('eth_accounts')) as `0x${string}`[]).map((a) => getAddress(a));
  const chainId = await pub.getChainId();
  const wallet = (account: `0x${string}`) => createWalletClient({ account, transport, chain: { id: chainId, name: 'hardhat', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } } });
  const mined = async (hash: `0x${string}`) => {
    const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (receipt.status !== 'success') throw new Error(`transaction ${hash} reverted`);
    return hash;
  };
  const write = async (token: `0x${string}`, from: `0x${string}`, functionName: string, args: unknown[]) =>
    mined(await wallet(from).writeContract({ address: token, abi: artifact.abi, functionName, args } as never));
  return {
    url,
    chainId,
    accounts,
    rpc,
    async deployToken(name, symbol) {
      const hash = await wallet(accounts[0]!).deployContract({ abi: artifact.abi, bytecode: artifact.bytecode, args: [name, symbol] } as never);
      const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
      return getAddress(receipt.contractAddress!);
    },
    mint: (token, to, units) => write(token, accounts[0]!, 'mint', [to, units]),
    transfer: (token, from, to, units) => write(token, from, 'transfer', [to, units]),
    transferTwice: (token, from, a, b) => write(token, from, 'transferTwice', [a[0], a[1], b[0], b[1]]),
    async signTransfer(token, index, to, units) {
      const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: index });
      const nonce = await pub.getTransactionCount({ address: account.address, blockTag: 'pending' });
      return account.signTransaction({
        chainId,
        type: 'eip1559',
        to: token,
        nonce,
        gas: 100_000n,
        maxFeePerGas: 100_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
        data: encodeFunctionData({ abi: artifact.abi, functionName: 'transfer', args: [to, units] }),
      });
    },
    sendRaw: async (raw) => mined(await pub.sendRawTransaction({ serializedTransaction: raw })),
    mine: async (blocks = 1) => {
      await rpc('hardhat_mine', [`0x${blocks.toString(16)}`]);
    },
    blockNumber: async () => Number(await pub.getBlockNumber({ cacheTime: 0 })),
    snapshot: () => rpc<string>('evm_snapshot'),
    revert: async (id) => {
      if (!(await rpc<boolean>('evm_revert', [id]))) throw new Error('evm_revert failed');
    },
    increaseTime: async (seconds) => {
      await rpc('evm_increaseTime', [seconds]);
      await rpc('evm_mine');
    },
    submitTransfer: (token, from, to, units) =>
      rpc<`0x${string}`>('eth_sendTransaction', [{ from, to: token, data: encodeFunctionData({ abi: artifact.abi, functionName: 'transfer', args: [to, units] }) }]),
    setAutomine: async (on) => {
      await rpc('evm_setAutomine', [on]);
    },
    close: () => server.close(),
  };
}

export const USDC = (tokens: number) => BigInt(Math.round(tokens * 1_000_000));
