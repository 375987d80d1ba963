/**
 * The Ed25519 key pair that signs webhook deliveries (`v1a`). One key serves every endpoint; the
 * private half is sealed with ENCRYPTION_KEY at rest and only ever opened in memory to sign.
 */
import { generateKeyPairSync } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { components } from '../../generated/merchant.js';
import type { SigningKeyRepository } from './signing-key.repository.js';

export type SigningKeyDocument = components['schemas']['WebhookSigningKey'];

export class SigningKeyService {
  constructor(
    private readonly repo: SigningKeyRepository,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  /** Creates the first key when none exists; safe when several processes start at once. */
  async ensureKey(): Promise<void> {
    if (await this.repo.findCurrent()) return;
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const id = newId('WSK');
    const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    const sealed = this.box.seal(privateKey.export({ format: 'der', type: 'pkcs8' }), id);
    await this.repo.insertIfNoCurrent({ id, publicKey: raw, privateKeySealed: sealed, createdAt: this.clock.now(), retiredAt: null, publishUntil: null });
  }

  async publishedKeys(): Promise<SigningKeyDocument> {
    const keys = await this.repo.listPublished(this.clock.now());
    const current = keys.find((k) => k.retiredAt === null) ?? keys[0];
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
