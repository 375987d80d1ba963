/**
 * The wallet's secp256k1 signature of a 32-byte digest, as Ethereum wants it: deterministic
 * (RFC 6979, no extra entropy), low-S, serialized as the 65-byte `r || s || v` hex with
 * v = 27 + recovery bit. Byte for byte what viem's `sign({ hash, privateKey, to: 'hex' })` returns
 * (it calls the same @noble/curves function), minus its hex round trips and async wrapper.
 */
import { secp256k1 } from '@noble/curves/secp256k1';
import type { Hex } from 'viem';

export function signDigest(digest: Uint8Array, privateKey: Uint8Array): Hex {
  if (digest.length !== 32) throw new Error('digest must be 32 bytes');
  const signature = secp256k1.sign(digest, privateKey, { lowS: true, extraEntropy: false });
  return `0x${signature.toCompactHex()}${signature.recovery ? '1c' : '1b'}`;
}
