import { createCipheriv, createDecipheriv, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** SHA-256 hex of a secret; API keys are stored only in this form. */
// One-shot crypto.hash (Node ≥ 20.12): no Hash object per call; every merchant request hashes its key.
export const sha256Hex = (value: string): string => hash('sha256', value, 'hex');

/** Constant-time equality of two strings: both are hashed first so lengths leak nothing either. */
export function constantTimeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash('sha256', a, 'buffer'), hash('sha256', b, 'buffer'));
}

/**
 * AES-256-GCM box for secrets at rest (webhook signing keys, wallet keys). The key comes from
 * config (`ENCRYPTION_KEY`, 32 bytes base64); the output is `v1.<iv>.<tag>.<ciphertext>` in base64url.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('encryption key must be 32 bytes');
  }
  seal(plaintext: Buffer, associatedData = ''): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const tag = cipher.getAuthTag();
    return ['v1', iv, tag, body].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }
  open(sealed: string, associatedData = ''): Buffer {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unrecognised sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(associatedData));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]);
  }
}
