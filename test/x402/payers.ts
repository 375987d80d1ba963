/**
 * Independent x402 payers for the concurrency tests: local accounts holding the EIP-3009 test
 * token, each signing its own `transferWithAuthorization` (as any x402 client does), so that N
 * payments can be in flight at once without sharing an agent wallet or its policy.
 */
import { randomBytes } from 'node:crypto';
import { createPublicClient, createWalletClient, getAddress, http, type Abi } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';

export interface PaymentTerms {
  chainId: number;
  network: `eip155:${number}`;
  token: `0x${string}`;
  payTo: `0x${string}`;
  amount: bigint;
  /** The EIP-712 domain of the token (the test token's: USD Coin, 2). */
  name?: string;
  version?: string;
}

const TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** `count` fresh accounts, each minted `units` of the token by `minter` (an unlocked account of the node). */
export async function fundedPayers(options: { rpcUrl: string; chainId: number; token: `0x${string}`; abi: Abi; minter: `0x${string}`; count: number; units: bigint }): Promise<PrivateKeyAccount[]> {
  const transport = http(options.rpcUrl, { retryCount: 0 });
  const chain = { id: options.chainId, name: 'hardhat', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [options.rpcUrl] } } };
  const pub = createPublicClient({ transport, chain });
  const minter = createWalletClient({ account: options.minter, transport, chain });
  const payers = Array.from({ length: options.count }, () => privateKeyToAccount(generatePrivateKey()));
  for (const payer of payers) {
    const hash = await minter.writeContract({ address: options.token, abi: options.abi, functionName: 'mint', args: [payer.address, options.units] } as never);
    // With interval mining the mint waits for its block.
    await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  }
  return payers;
}

/** The x402 v2 request a facilitator's `settle` takes: terms as the merchant declared them, a fresh signed authorization. */
export async function signedPayment(payer: PrivateKeyAccount, terms: PaymentTerms, validBefore: bigint) {
  const requirements = {
    scheme: 'exact' as const,
    network: terms.network,
    asset: terms.token,
    amount: terms.amount.toString(),
    payTo: getAddress(terms.payTo),
    maxTimeoutSeconds: 300,
    extra: { name: terms.name ?? 'USD Coin', version: terms.version ?? '2' },
  };
  const authorization = {
    from: payer.address,
    to: getAddress(terms.payTo),
    value: terms.amount,
    validAfter: 0n,
    validBefore,
    nonce: `0x${randomBytes(32).toString('hex')}` as `0x${string}`,
  };
  const signature = await payer.signTypedData({
    domain: { name: requirements.extra.name, version: requirements.extra.version, chainId: terms.chainId, verifyingContract: terms.token },
    types: TYPES,
    primaryType: 'TransferWithAuthorization',
    message: authorization,
  });
  const paymentPayload = {
    x402Version: 2 as const,
    accepted: requirements,
    payload: {
      signature,
      authorization: { ...authorization, value: authorization.value.toString(), validAfter: '0', validBefore: validBefore.toString() },
    },
  };
  return { x402Version: 2 as const, paymentPayload, paymentRequirements: requirements };
}
