/**
 * The `BearerAuth` authenticator of the platform app: resolves the telemetry key, counts the
 * request against the key's rate-limit window and puts the `X-RateLimit-*` headers on the
 * response, so every answer to an authenticated request carries them (errors included).
 */
import type { Authenticator } from '../http/openapi-app.js';
import { rateLimitHeaders, type TelemetryKeyService } from './keys.service.js';

export function telemetryAuthenticator(keys: TelemetryKeyService): Authenticator {
  return async (req) => {
    const { auth, rate } = await keys.authenticate(req.header('authorization'));
    for (const [name, value] of Object.entries(rateLimitHeaders(rate))) req.res?.setHeader(name, value);
    return auth;
  };
}
