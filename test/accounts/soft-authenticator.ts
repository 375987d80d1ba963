/**
 * A software WebAuthn authenticator for API-level tests: ES256 keys from node:crypto, 'none'
 * attestation, a signature counter the test controls, and clientDataJSON for any origin, so a
 * test can answer a ceremony rightly or wrongly (another origin, a replayed challenge, a counter
 * that went backwards). The browser tests use Chromium's virtual authenticator instead.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

/** Minimal CBOR (RFC 8949) for attestation objects and COSE keys: unsigned/negative ints, bytes, text, maps. */
function cbor(value: unknown): Buffer {
  const head = (major: number, n: number) => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 256) return Buffer.from([(major << 5) | 24, n]);
    if (n < 65536) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
    const b = Buffer.alloc(5);
    b[0] = (major << 5) | 26;
    b.writeUInt32BE(n, 1);
    return b;
  };
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) {
    const parts: Buffer[] = [head(5, value.size)];
    for (const [k, v] of value) parts.push(cbor(k), cbor(v));
    return Buffer.concat(parts);
  }
  throw new Error(`cbor: unsupported ${typeof value}`);
}

export interface SoftCredential {
  id: string;
  rawId: Buffer;
  privateKey: KeyObject;
  publicKeyCose: Buffer;
  counter: number;
  userHandle: string | null;
}

const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

export function counterBytes(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
}

interface CreationOptions {
  challenge: string;
  rp: { id: string };
  user: { id: string };
}
interface RequestOptions {
  challenge: string;
  rpId: string;
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];

  /** navigator.credentials.create(): a new ES256 credential, answered as `toJSON()` would. */
  create(options: CreationOptions, origin: string, overrides: { rpId?: string; type?: string; reuse?: SoftCredential } = {}) {
    let credential: SoftCredential;
    if (overrides.reuse) credential = overrides.reuse;
    else {
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      const publicKeyCose = cbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x!, 'base64url')], [-3, Buffer.from(jwk.y!, 'base64url')]]));
      const rawId = randomBytes(16);
      credential = { id: b64url(rawId), rawId, privateKey, publicKeyCose, counter: 0, userHandle: options.user.id };
    }
    const { rawId, publicKeyCose } = credential;
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(rawId.length, 0);
    const authData = Buffer.concat([sha256(overrides.rpId ?? options.rp.id), Buffer.from([UP | UV | AT]), counterBytes(0), Buffer.alloc(16), idLength, rawId, publicKeyCose]);
    const clientDataJSON = JSON.stringify({ type: overrides.type ?? 'webauthn.create', challenge: options.challenge, origin, crossOrigin: false });
    const attestationObject = cbor(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]));
    if (!overrides.reuse) this.credentials.push(credential);
    return {
      credential,
      json: {
        id: credential.id,
        rawId: credential.id,
        type: 'public-key',
        response: { clientDataJSON: b64url(clientDataJSON), attestationObject: b64url(attestationObject), transports: ['internal'] },
        clientExtensionResults: { credProps: { rk: true } },
        authenticatorAttachment: 'platform',
      },
    };
  }

  /** navigator.credentials.get(): an assertion by `credential`, its counter moved by `step` (0 or less: a clone's stale counter). */
  get(options: RequestOptions, origin: string, credential: SoftCredential, opts: { step?: number; counter?: number; userVerified?: boolean } = {}) {
    const counter = opts.counter ?? credential.counter + (opts.step ?? 1);
    credential.counter = Math.max(credential.counter, counter);
    const authData = Buffer.concat([sha256(options.rpId), Buffer.from([UP | (opts.userVerified === false ? 0 : UV)]), counterBytes(counter)]);
    const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin, crossOrigin: false }));
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.privateKey);
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        ...(credential.userHandle ? { userHandle: credential.userHandle } : {}),
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }
}
