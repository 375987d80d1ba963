/**
 * Verification of an x402 `exact` EIP-3009 payment: the buyer's authorization checked against the
 * merchant's requirements, without the chain (`check`) and with it (`checkOnChain`). Nothing here
 * decides what is sold (x402-sale.ts) or moves funds (x402-settlement.ts).
 */
import { createHash } from 'node:crypto';
import { getAddress, isAddress, isErc6492Signature, parseSignature, recoverTypedDataAddress, type Hex } from 'viem';
import canonicalize from 'canonicalize';
import type { Clock } from '../kernel/clock.js';
import type { ChainConfig, CryptoConfig, TokenConfig } from './crypto-config.js';
import type { CryptoRepository } from './crypto.repository.js';
import { isNodeUnreachable, type TransferArgs, type X402Chain } from './x402-chain.js';
import { X402_REASONS, X402Refusal } from './x402-reasons.js';
import type { BuyerPayment, PaymentRequirements } from './x402-terms.js';
import type { X402Repository, X402Settlement } from './x402.repository.js';

const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** Seconds an authorization must still be valid for when verified (time to submit it), as the reference facilitator. */
const VALIDITY_MARGIN_SECONDS = 6;

/** A payment that passed every check that needs no chain. */
export interface CheckedPayment {
  chain: ChainConfig;
  token: TokenConfig;
  payTo: `0x${string}`;
  from: `0x${string}`;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  signature: Hex;
  /** One canonical form of the whole payment: the same payload settles to the same result. */
  payloadHash: string;
  /** Kassa's settlement of this authorization, when one exists. */
  recorded: X402Settlement | undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export class X402Verifier {
  constructor(
    private readonly config: CryptoConfig,
    private readonly wallets: Pick<CryptoRepository, 'findWallet'>,
    private readonly repo: Pick<X402Repository, 'findByAuthorization' | 'findRelayer'>,
    private readonly chainOf: (chain: ChainConfig) => X402Chain,
    private readonly clock: Clock,
  ) {}

  /** Every check that needs no chain: terms, payee, token, amount, signature, window, Kassa's own record of the nonce. */
  async check(orgId: string, buyer: BuyerPayment, req: PaymentRequirements): Promise<CheckedPayment> {
    const accepted = buyer.accepted;
    if (!isObject(accepted)) throw new X402Refusal(X402_REASONS.payload, 'The payment payload has no accepted terms');
    if (req.scheme !== 'exact' || accepted.scheme !== 'exact') throw new X402Refusal(X402_REASONS.scheme, 'Only the exact scheme is supported');
    if (accepted.network !== req.network) throw new X402Refusal(X402_REASONS.networkMismatch, 'The payment was made for another network');
    const chainMatch = /^eip155:([0-9]{1,12})$/.exec(req.network);
    const chain = chainMatch ? this.config.chains.find((c) => c.chainId === Number(chainMatch[1])) : undefined;
    if (!chain) throw new X402Refusal(X402_REASONS.network, `Network ${req.network} is not configured on this facilitator`);
    const token = chain.tokens.find((t) => t.address.toLowerCase() === req.asset.toLowerCase());
    if (!token) throw new X402Refusal(X402_REASONS.requirements, `Asset ${req.asset} is not a configured stablecoin on ${chain.name}`);
    if (
      typeof accepted.asset !== 'string' || accepted.asset.toLowerCase() !== req.asset.toLowerCase() ||
      accepted.amount !== req.amount ||
      typeof accepted.payTo !== 'string' || accepted.payTo.toLowerCase() !== req.payTo.toLowerCase()
    ) {
      throw new X402Refusal(X402_REASONS.requirements, 'The payment accepted other terms than these requirements');
    }
    const wallet = await this.wallets.findWallet(orgId, chain.chainId);
    if (!wallet || !isAddress(req.payTo, { strict: false }) || getAddress(req.payTo) !== wallet.address) {
      throw new X402Refusal(X402_REASONS.recipient, `payTo must be the organization's receiving wallet on ${chain.name}`);
    }
    const extra = req.extra as { name?: unknown; version?: unknown } | undefined;
    if (typeof extra?.name !== 'string' || typeof extra?.version !== 'string') {
      throw new X402Refusal(X402_REASONS.missingDomain, 'paymentRequirements.extra must give the token\'s EIP-712 name and version');
    }

    const payload = buyer.payload;
    const auth = isObject(payload) ? payload.authorization : undefined;
    if (!isObject(payload) || !isObject(auth) || typeof payload.signature !== 'string' || !/^0x(?:[0-9a-fA-F]{2})+$/.test(payload.signature)) {
      throw new X402Refusal(X402_REASONS.unsupportedPayload, 'Expected an EIP-3009 payload: {signature, authorization}');
    }
    const address = (v: unknown) => (typeof v === 'string' && isAddress(v, { strict: false }) ? getAddress(v) : undefined);
    // uint256 as the scheme allows (the official facilitator reads them with BigInt): decimal, or 0x hex.
    const uint = (v: unknown) => {
      if (typeof v !== 'string' || !/^(?:[0-9]{1,78}|0x[0-9a-fA-F]{1,64})$/.test(v)) return undefined;
      const n = BigInt(v);
      return n < 2n ** 256n ? n : undefined;
    };
    const from = address(auth.from);
    const to = address(auth.to);
    const value = uint(auth.value);
    const validAfter = uint(auth.validAfter);
    const validBefore = uint(auth.validBefore);
    const nonce = typeof auth.nonce === 'string' && /^0x[0-9a-fA-F]{64}$/.test(auth.nonce) ? (auth.nonce.toLowerCase() as Hex) : undefined;
    if (!from || !to || value === undefined || validAfter === undefined || validBefore === undefined || !nonce) {
      throw new X402Refusal(X402_REASONS.authorization, 'The authorization is malformed');
    }
    if (to !== wallet.address) throw new X402Refusal(X402_REASONS.recipient, 'The authorization pays another address than payTo', from);
    if (value !== BigInt(req.amount)) {
      throw new X402Refusal(X402_REASONS.valueMismatch, `The authorization is for ${value} units, the price is ${req.amount}`, from);
    }
    const signature = payload.signature as Hex;
    // Smart-contract wallets are refused (documented): Kassa relays the (v, r, s) form of
    // transferWithAuthorization, which only an ECDSA key's signature fits. An ERC-6492 signature
    // (a wallet not yet deployed) gets the code the official facilitator gives with no allowed
    // deployment factory (its default); any other non-ECDSA signature (ERC-1271) is not by `from`.
    if (isErc6492Signature(signature)) throw new X402Refusal(X402_REASONS.factoryNotAllowed, 'Smart-wallet (ERC-6492) signatures are not accepted: pay from an externally owned account', from);
    if (signature.length !== 132) throw new X402Refusal(X402_REASONS.signature, 'Only a 65-byte ECDSA signature by the from address is accepted (no ERC-1271 smart-wallet signatures)', from);
    let signer: string;
    try {
      signer = await recoverTypedDataAddress({
        domain: { name: extra.name, version: extra.version, chainId: chain.chainId, verifyingContract: token.address },
        types: AUTHORIZATION_TYPES,
        primaryType: 'TransferWithAuthorization',
        message: { from, to, value, validAfter, validBefore, nonce },
        signature,
      });
    } catch {
      throw new X402Refusal(X402_REASONS.parseSignature, 'The signature cannot be parsed', from);
    }
    if (signer !== from) throw new X402Refusal(X402_REASONS.signature, 'The signature is not by the authorization\'s from address', from);
    const nowSeconds = BigInt(Math.floor(this.clock.now().getTime() / 1000));
    if (validBefore < nowSeconds + BigInt(VALIDITY_MARGIN_SECONDS)) {
      throw new X402Refusal(X402_REASONS.validBefore, `The authorization expired at ${isoOfSeconds(validBefore)}`, from);
    }
    if (validAfter > nowSeconds) {
      throw new X402Refusal(X402_REASONS.validAfter, `The authorization is valid only from ${isoOfSeconds(validAfter)}`, from);
    }
    const payloadHash = createHash('sha256')
      .update(canonicalize({ orgId, network: req.network, asset: token.address, payTo: wallet.address, from, value: value.toString(), validAfter: validAfter.toString(), validBefore: validBefore.toString(), nonce, signature: signature.toLowerCase() })!)
      .digest('hex');
    const recorded = await this.repo.findByAuthorization(chain.chainId, token.address, from, nonce);
    return { chain, token, payTo: wallet.address, from, value, validAfter, validBefore, nonce, signature, payloadHash, recorded };
  }

  /** The chain's view: nonce unused, balance sufficient, and the call would succeed from the relayer. */
  async checkOnChain(payment: CheckedPayment): Promise<void> {
    const chain = this.chainOf(payment.chain);
    if (await chain.authorizationUsed(payment.token.address, payment.from, payment.nonce)) {
      throw new X402Refusal(X402_REASONS.nonceUsed, 'This authorization nonce is already used on chain', payment.from);
    }
    if ((await chain.balanceOf(payment.token.address, payment.from)) < payment.value) {
      throw new X402Refusal(X402_REASONS.balance, `The payer holds less than ${payment.value} units`, payment.from);
    }
    const relayer = await this.repo.findRelayer();
    if (relayer) {
      try {
        await chain.simulate(relayer.address, payment.token.address, transferArgs(payment));
      } catch (err) {
        if (isNodeUnreachable(err)) throw err;
        throw new X402Refusal(X402_REASONS.simulation, 'The token contract would refuse this authorization', payment.from);
      }
    }
  }
}

/** A time in seconds as ISO 8601, or the number itself when no date can show it. */
function isoOfSeconds(seconds: bigint): string {
  const ms = Number(seconds) * 1000;
  return Number.isFinite(ms) && Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : `${seconds} (seconds)`;
}

export function transferArgs(p: CheckedPayment): TransferArgs {
  const { r, s, v, yParity } = parseSignature(p.signature);
  const vNumber = v !== undefined ? Number(v) : yParity + 27;
  return [p.from, p.payTo, p.value, p.validAfter, p.validBefore, p.nonce, vNumber, r, s];
}
