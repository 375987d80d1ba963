/**
 * An agent, against a running Kassa: load the Agent Wallet Key, read the agent's identity and its
 * wallet's policies, and obtain an EIP-712 signature for a 1 USDC TransferWithAuthorization
 * (EIP-3009, the x402 payment authorization) on Base — which the default policy of a new wallet
 * allows (at most 5 USDC per signature). Every request is signed with the agent's P-256 key; the
 * key never leaves this process.
 *
 *   KASSA_API_URL=http://localhost:3001 KASSA_AGENT_WALLET_KEY=<printed by `admin agent create`> \
 *     npx tsx scripts/examples/agent.ts
 *
 * Issue the key with the admin CLI:
 *   npm run -s admin -- wallet create --org ORG_…
 *   npm run -s admin -- agent create --org ORG_… --name "Shopping agent" --wallet WLT_…
 */
import { randomBytes } from 'node:crypto';
import { AgentApiError, createAgentClient, type TypedData } from '../../src/client/index.js';

const apiUrl = process.env.KASSA_API_URL ?? 'http://localhost:3001';
const agentWalletKey = process.env.KASSA_AGENT_WALLET_KEY;
if (!agentWalletKey) throw new Error('set KASSA_AGENT_WALLET_KEY (the Agent Wallet Key printed once by `admin agent create`)');
const log = (step: string, details: Record<string, unknown> = {}) => console.log(JSON.stringify({ step, ...details }));

/** USDC on Base mainnet (chain 8453), the contract the default policy allows. */
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

try {
  const agent = createAgentClient({ agentWalletKey, baseUrl: apiUrl });
  log('key loaded', { publicKey: `${agent.publicKey.slice(0, 24)}…`, walletId: agent.walletId });

  const identity = await agent.identity();
  log('identity', { agentId: identity.agentId, name: identity.name, walletId: identity.walletId, walletAddress: identity.walletAddress });
  if (!identity.walletAddress) throw new Error('this agent has no wallet assigned (admin agent assign)');

  const policies = await agent.policies();
  log('policies', { names: policies.map((p) => p.name) });

  const nowSeconds = Math.floor(Date.now() / 1000);
  const typedData: TypedData = {
    domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: BASE_USDC },
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      TransferWithAuthorization: [
        { name: 'from', type: 'address' },
        { name: 'to', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'validAfter', type: 'uint256' },
        { name: 'validBefore', type: 'uint256' },
        { name: 'nonce', type: 'bytes32' },
      ],
    },
    primary_type: 'TransferWithAuthorization',
    message: {
      from: identity.walletAddress,
      to: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      value: '1000000', // 1 USDC (6 decimals), as a decimal string
      validAfter: '0',
      validBefore: String(nowSeconds + 600),
      nonce: `0x${randomBytes(32).toString('hex')}`,
    },
  };
  const { signature, walletAddress } = await agent.signTypedData(typedData);
  log('signed', { walletAddress, signature });
  log('done');
} catch (err) {
  if (err instanceof AgentApiError) log('API error', { status: err.status, code: err.code, message: err.message });
  else log('failed', { message: err instanceof Error ? err.message : String(err) });
  process.exitCode = 1;
}
