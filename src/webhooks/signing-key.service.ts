/**
 * The Ed25519 key pair that signs webhook deliveries (`v1a`). One key serves every endpoint; the
 * private half is sealed with ENCRYPTION_KEY at rest and only ever opened in memory to sign.
 *
 * Rotation: `rotate()` makes a new key current and keeps the previous one published (and signing)
 * for a grace period, so every delivery carries one signature per published key and a receiver
 * holding either key keeps verifying until it refetches the signing-key document.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { conflict } from '../kernel/errors.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { components } from '../../generated/merchant.js';
import type { SigningKey, SigningKeyRepository } from './signing-key.repository.js';

export type SigningKeyDocument = components['schemas']['WebhookSigningKey'];

/** A published key opened for signing. */
export interface Signer {
  keyId: string;
  privateKey: KeyObject;
}

export interface RotationResult {
  current: SigningKey;
  retired: SigningKey | undefined;
  published: SigningKey[];
}

/** Default grace period of a retired key: receivers cache the document 5 minutes and refetch on failure, a week is generous. */
export const DEFAULT_ROTATION_GRACE_SECONDS = 7 * 24 * 3600;

/** Current key first, then retired keys still in their grace period, newest first. */
function currentFirst(keys: SigningKey[]): SigningKey[] {
  return [...keys].sort((a, b) => Number(a.retiredAt !== null) - Number(b.retiredAt !== null) || b.createdAt.getTime() - a.createdAt.getTime());
}

export class SigningKeyService {
  /** Opened private keys by key id: opening (AES-GCM + PKCS#8 parse) is done once per key and process. */
  private readonly opened = new Map<string, KeyObject>();

  constructor(
    private readonly repo: SigningKeyRepository,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private generate(): SigningKey {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const id = newId('WSK');
    const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    // The key id is the associated data: a sealed key copied onto another row does not open.
    const sealed = this.box.seal(privateKey.export({ format: 'der', type: 'pkcs8' }), id);
    return { id, publicKey: raw, privateKeySealed: sealed, createdAt: this.clock.now(), retiredAt: null, publishUntil: null };
  }

  /** Creates the first key when none exists; safe when several processes start at once. */
  async ensureKey(): Promise<void> {
    if (await this.repo.findCurrent()) return;
    await this.repo.insertIfNoCurrent(this.generate());
  }

  /**
   * `minKeyAgeSeconds`: refuse (409) while the current key is younger than that. The one key signs
   * for every organization, so a member's rotation (console) waits a day between rotations: each
   * rotation adds a published key (one more signature per delivery) for its grace period.
   */
  async rotate(graceSeconds: number = DEFAULT_ROTATION_GRACE_SECONDS, options: { minKeyAgeSeconds?: number } = {}): Promise<RotationResult> {
    const now = this.clock.now();
    if (options.minKeyAgeSeconds !== undefined) {
      const current = await this.repo.findCurrent();
      if (current && now.getTime() - current.createdAt.getTime() < options.minKeyAgeSeconds * 1000) {
        const hours = Math.round(options.minKeyAgeSeconds / 3600);
        throw conflict(`The signing key was rotated less than ${hours} hours ago (at ${current.createdAt.toISOString()}); rotate again after ${new Date(current.createdAt.getTime() + options.minKeyAgeSeconds * 1000).toISOString()}`);
      }
    }
    const next = this.generate();
    let retired: SigningKey | undefined;
    try {
      retired = await this.repo.rotate(next, now, new Date(now.getTime() + graceSeconds * 1000));
    } catch (err) {
      // The one-current-key unique index: another rotation committed first.
      if ((err as { code?: string }).code === '23505') throw conflict('Another signing-key rotation happened at the same time; nothing changed');
      throw err;
    }
    return { current: next, retired, published: await this.published() };
  }

  async published(): Promise<SigningKey[]> {
    return currentFirst(await this.repo.listPublished(this.clock.now()));
  }

  /** Every published key, opened, current first: a delivery carries one signature per signer. */
  async signers(): Promise<Signer[]> {
    const keys = await this.published();
    if (keys.length === 0) throw new Error('no webhook signing key: ensureKey() was not run');
    return keys.map((key) => ({ keyId: key.id, privateKey: this.open(key) }));
  }

  private open(key: SigningKey): KeyObject {
    let privateKey = this.opened.get(key.id);
    if (!privateKey) {
      privateKey = createPrivateKey({ key: this.box.open(key.privateKeySealed, key.id), format: 'der', type: 'pkcs8' });
      this.opened.set(key.id, privateKey);
    }
    return privateKey;
  }

  async publishedKeys(): Promise<SigningKeyDocument> {
    const keys = await this.published();
    const current = keys[0];
    if (!current) throw new Error('no webhook signing key: ensureKey() was not run');
    return {
      keyId: current.id,
      algorithm: 'ed25519',
      publicKey: `whpk_${current.publicKey.toString('base64')}`,
      keys: keys.map((k) => ({
        kty: 'OKP',
        use: 'sig',
        crv: 'Ed25519',
        kid: k.id,
        x: k.publicKey.toString('base64url'),
        alg: 'EdDSA',
      })),
    };
  }
}
