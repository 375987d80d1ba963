/**
 * Passkey ceremonies in the browser with the plain WebAuthn API: the server's options (JSON,
 * binary fields in base64url, WebAuthn Level 3) become the ArrayBuffers navigator.credentials
 * wants, and the credential it answers becomes the JSON the API takes. A few lines instead of
 * @simplewebauthn/browser (a few KB gzip more, and a dependency): PublicKeyCredential's own
 * parse…FromJSON/toJSON are not yet in every browser the console supports, so the conversion is
 * ours (webauthn-codec.ts), and tested (test/console/webauthn.test.ts).
 */
import { assertionJSON, attestationJSON, creationOptions, requestOptions, type AssertionJSON, type AttestationJSON, type CreationOptionsJSON, type RequestOptionsJSON } from './webauthn-codec';

export type { AssertionJSON, AttestationJSON, CreationOptionsJSON, RequestOptionsJSON };

export const passkeysSupported = () => typeof window !== 'undefined' && typeof window.PublicKeyCredential === 'function' && !!navigator.credentials;

/** Creates a passkey with the server's options; undefined when the person cancelled. */
export async function createPasskey(options: CreationOptionsJSON): Promise<AttestationJSON | undefined> {
  const credential = (await navigator.credentials.create({ publicKey: creationOptions(options) as PublicKeyCredentialCreationOptions }).catch(cancelled)) as PublicKeyCredential | null | undefined;
  return credential ? attestationJSON(credential as PublicKeyCredential & { response: AuthenticatorAttestationResponse }) : undefined;
}

/** Asks the authenticator to sign the server's challenge; undefined when the person cancelled. */
export async function getPasskey(options: RequestOptionsJSON): Promise<AssertionJSON | undefined> {
  const credential = (await navigator.credentials.get({ publicKey: requestOptions(options) as PublicKeyCredentialRequestOptions }).catch(cancelled)) as PublicKeyCredential | null | undefined;
  return credential ? assertionJSON(credential as PublicKeyCredential & { response: AuthenticatorAssertionResponse }) : undefined;
}

/** NotAllowedError is a cancelled or timed-out prompt: nothing to report but "try again". */
function cancelled(error: unknown): undefined {
  if (error instanceof DOMException && error.name === 'NotAllowedError') return undefined;
  throw error;
}

/** What to tell the person when the browser refused a ceremony. */
export function ceremonyError(error: unknown): string {
  if (error instanceof DOMException && error.name === 'InvalidStateError') return 'This passkey is already registered to your account.';
  if (error instanceof DOMException && error.name === 'SecurityError') return 'This browser refused the passkey for this address (passkeys need HTTPS or localhost).';
  return error instanceof Error ? error.message : 'The passkey could not be used.';
}
