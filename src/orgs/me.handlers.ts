import type { MerchantHandlers } from '../handler-maps.js';

export function createMeHandlers(): Pick<MerchantHandlers, 'getMe'> {
  return {
    getMe: async ({ auth }) => ({
      status: 200,
      body: {
        success: true,
        message: 'OK',
        data: { apiKeyId: auth.apiKeyId, orgId: auth.orgId, permissions: auth.permissions as never },
      },
    }),
  };
}
