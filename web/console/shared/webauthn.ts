/**
 * Passkey ceremonies in the browser with the plain WebAuthn API: the server's options (JSON,
 * binary fields in base64url, WebAuthn Level 3) become the ArrayBuffers navigator.credentials
 * wants, and the credential it answers becomes the JSON the API takes. A few lines instead of
 * @simplewebauthn/browser (about 4 KB gzip more in the bundle): PublicKeyCredential's own
 * parse…FromJSON/toJSON are not yet in every browser the console supports, so the conversion is
 * ours, and tested (test/console/webauthn.test.ts).
 */
import type { components } from '../../../generated/console';

type Schemas = components['schemas'];
export type CreationOptionsJSON = Schemas['PasskeyCreationOptions'];
export type RequestOptionsJSON = Schemas['PasskeyRequestOptions'];
export type AttestationJSON = Schemas['PasskeyAttestationCredential'];
export type AssertionJSON = Schemas['PasskeyAssertionCredential'];

export function base64urlToBytes(value: string): Uint8Array<ArrayBuffer> {
  const base64 = value.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((value.length + 3) % 4);
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function bytesToBase64url(value: ArrayBuffer | ArrayBufferView): string {
  const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  let binary = '';
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

type Descriptor = Schemas['CredentialDescriptor'];
const descriptor = (d: Descriptor): PublicKeyCredentialDescriptor => ({ type: d.type, id: base64urlToBytes(d.id), ...(d.transports ? { transports: d.transports as AuthenticatorTransport[] } : {}) });

export function creationOptions(json: CreationOptionsJSON): PublicKeyCredentialCreationOptions {
  const { hints: _hints, excludeCredentials, ...rest } = json;
  return {
    ...rest,
    challenge: base64urlToBytes(json.challenge),
    user: { ...json.user, id: base64urlToBytes(json.user.id) },
    ...(excludeCredentials ? { excludeCredentials: excludeCredentials.map(descriptor) } : {}),
  };
}

export function requestOptions(json: RequestOptionsJSON): PublicKeyCredentialRequestOptions {
  const { allowCredentials, ...rest } = json;
  return {
    ...rest,
    challenge: base64urlToBytes(json.challenge),
    ...(allowCredentials ? { allowCredentials: allowCredentials.map(descriptor) } : {}),
  };
}

type Attachment = AttestationJSON['authenticatorAttachment'];
const attachmentOf = (credential: PublicKeyCredential) =>
  credential.authenticatorAttachment === 'platform' || credential.authenticatorAttachment === 'cross-platform' ? { authenticatorAttachment: credential.authenticatorAttachment as Attachment } : {};

export function attestationJSON(credential: PublicKeyCredential): AttestationJSON {
  const response = credential.response as AuthenticatorAttestationResponse;
  const transports = typeof response.getTransports === 'function' ? (response.getTransports() as AttestationJSON['response']['transports']) : undefined;
  return {
    id: credential.id,
    rawId: bytesToBase64url(credential.rawId),
    type: 'public-key',
    ...attachmentOf(credential),
    clientExtensionResults: credential.getClientExtensionResults() as AttestationJSON['clientExtensionResults'],
    response: {
      clientDataJSON: bytesToBase64url(response.clientDataJSON),
      attestationObject: bytesToBase64url(response.attestationObject),
      ...(transports ? { transports } : {}),
    },
  };
}

export function assertionJSON(credential: PublicKeyCredential): AssertionJSON {
  const response = credential.response as AuthenticatorAssertionResponse;
  return {
    id: credential.id,
    rawId: bytesToBase64url(credential.rawId),
    type: 'public-key',
    ...attachmentOf(credential),
    clientExtensionResults: credential.getClientExtensionResults() as AssertionJSON['clientExtensionResults'],
    response: {
      clientDataJSON: bytesToBase64url(response.clientDataJSON),
      authenticatorData: bytesToBase64url(response.authenticatorData),
      signature: bytesToBase64url(response.signature),
      ...(response.userHandle ? { userHandle: bytesToBase64url(response.userHandle) } : {}),
    },
  };
}

export const passkeysSupported = () => typeof window !== 'undefined' && typeof window.PublicKeyCredential === 'function' && !!navigator.credentials;

/** Creates a passkey with the server's options; undefined when the person cancelled. */
export async function createPasskey(options: CreationOptionsJSON): Promise<AttestationJSON | undefined> {
  const credential = (await navigator.credentials.create({ publicKey: creationOptions(options) }).catch(cancelled)) as PublicKeyCredential | null | undefined;
  return credential ? attestationJSON(credential) : undefined;
}

/** Asks the authenticator to sign the server's challenge; undefined when the person cancelled. */
export async function getPasskey(options: RequestOptionsJSON): Promise<AssertionJSON | undefined> {
  const credential = (await navigator.credentials.get({ publicKey: requestOptions(options) }).catch(cancelled)) as PublicKeyCredential | null | undefined;
  return credential ? assertionJSON(credential) : undefined;
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
