import type { SigningKeyHandlers } from '../handler-maps.js';
import type { SigningKeyService } from './signing-key.service.js';

export function createSigningKeyHandlers(signingKeys: SigningKeyService): SigningKeyHandlers {
  return {
    getWebhookSigningKey: async () => ({
      status: 200,
      // Short enough that a rotation reaches verifiers within minutes; receivers refetch on failure anyway.
      headers: { 'Cache-Control': 'public, max-age=300' },
      body: { success: true, message: 'OK', data: await signingKeys.publishedKeys() },
    }),
  };
}
