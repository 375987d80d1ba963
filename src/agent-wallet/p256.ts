/**
 * P-256 (secp256r1) verification with node:crypto. Parsing a public key costs far more than a
 * verification, so KeyObjects are cached per key; node verifies high-S and low-S DER alike.
 */
import { createPublicKey, generateKeyPairSync, verify, type KeyObject } from 'node:crypto';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** DER SPKI of a P-256 key with an uncompressed point. */
export const P256_SPKI_LENGTH = 91;
const CACHE_LIMIT = 10_000;

const cache = new Map<string, KeyObject>();

/** Standard base64 with padding, and canonical (re-encoding gives the same text). */
export function decodeBase64Strict(value: string): Buffer | undefined {
  if (!BASE64.test(value) || value.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(value, 'base64');
  return bytes.toString('base64') === value ? bytes : undefined;
}

/**
 * The KeyObject of a base64 DER SPKI P-256 public key, or undefined when it is not one.
 * Cached (bounded, oldest evicted first), so a busy agent's key is parsed once.
 */
export function p256PublicKey(base64Spki: string): KeyObject | undefined {
  const hit = cache.get(base64Spki);
  if (hit) return hit;
  const der = decodeBase64Strict(base64Spki);
  if (!der || der.length !== P256_SPKI_LENGTH) return undefined;
  let key: KeyObject;
  try {
    key = createPublicKey({ key: der, format: 'der', type: 'spki' });
  } catch {
    return undefined;
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return undefined;
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(base64Spki, key);
  return key;
}

/**
 * Strict DER `ECDSA-Sig-Value`: SEQUENCE of two positive, minimally encoded INTEGERs of at
 * most 33 bytes, nothing after. Returns r and s without sign padding, or undefined.
 */
export function parseDerSignature(der: Buffer): { r: Buffer; s: Buffer } | undefined {
  if (der.length < 8 || der.length > 72 || der[0] !== 0x30 || der[1] !== der.length - 2) return undefined;
  let offset = 2;
  const readInt = (): Buffer | undefined => {
    if (der[offset] !== 0x02) return undefined;
    const len = der[offset + 1]!;
    const start = offset + 2;
    if (len < 1 || len > 33 || start + len > der.length) return undefined;
    const bytes = der.subarray(start, start + len);
    if (bytes[0]! & 0x80) return undefined; // negative
    if (len > 1 && bytes[0] === 0 && !(bytes[1]! & 0x80)) return undefined; // not minimal
    offset = start + len;
    const value = bytes[0] === 0 ? bytes.subarray(1) : bytes;
    return value.length === 0 || value.length > 32 ? undefined : value;
  };
  const r = readInt();
  const s = r && readInt();
  if (!r || !s || offset !== der.length) return undefined;
  return { r, s };
}

export function verifyP256(key: KeyObject, payload: Buffer, derSignature: Buffer): boolean {
  try {
    return verify('sha256', payload, { key, dsaEncoding: 'der' }, derSignature);
  } catch {
    return false;
  }
}

/** A fresh P-256 key pair: standard base64 DER SPKI public key and PKCS#8 private key. */
export function generateP256KeyPair(): { publicKey: string; privateKey: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    privateKey: privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64'),
  };
}
