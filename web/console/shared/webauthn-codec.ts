/**
 * The WebAuthn JSON ↔ bytes conversions of the console (web/console/shared/webauthn.ts runs the
 * ceremonies): base64url, the server's options (WebAuthn Level 3 JSON) → the ArrayBuffers
 * navigator.credentials wants, and its credential → the JSON the API takes. No DOM names here
 * (the credentials are typed by their shape), so the unit test (test/console/webauthn.test.ts)
 * typechecks under the server's tsconfig too.
 */
import type { components } from '../../../generated/console.js';

type Schemas = components['schemas'];
export type CreationOptionsJSON = Schemas['PasskeyCreationOptions'];
export type RequestOptionsJSON = Schemas['PasskeyRequestOptions'];
export type AttestationJSON = Schemas['PasskeyAttestationCredential'];
export type AssertionJSON = Schemas['PasskeyAssertionCredential'];

/** What a PublicKeyCredential has that the conversions read. */
interface CredentialLike<R> {
  id: string;
  rawId: ArrayBuffer;
  authenticatorAttachment?: string | null;
  getClientExtensionResults(): unknown;
  response: R;
}
type AttestationResponseLike = { clientDataJSON: ArrayBuffer; attestationObject: ArrayBuffer; getTransports?: () => string[] };
type AssertionResponseLike = { clientDataJSON: ArrayBuffer; authenticatorData: ArrayBuffer; signature: ArrayBuffer; userHandle: ArrayBuffer | null };

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
const descriptor = (d: Descriptor) => ({ type: d.type, id: base64urlToBytes(d.id), ...(d.transports ? { transports: d.transports } : {}) });

export function creationOptions(json: CreationOptionsJSON) {
  const { hints: _hints, excludeCredentials, ...rest } = json;
  return {
    ...rest,
    challenge: base64urlToBytes(json.challenge),
    user: { ...json.user, id: base64urlToBytes(json.user.id) },
    ...(excludeCredentials ? { excludeCredentials: excludeCredentials.map(descriptor) } : {}),
  };
}

export function requestOptions(json: RequestOptionsJSON) {
  const { allowCredentials, ...rest } = json;
  return {
    ...rest,
    challenge: base64urlToBytes(json.challenge),
    ...(allowCredentials ? { allowCredentials: allowCredentials.map(descriptor) } : {}),
  };
}

type Attachment = AttestationJSON['authenticatorAttachment'];
const attachmentOf = (credential: CredentialLike<unknown>) =>
  credential.authenticatorAttachment === 'platform' || credential.authenticatorAttachment === 'cross-platform' ? { authenticatorAttachment: credential.authenticatorAttachment as Attachment } : {};

export function attestationJSON(credential: CredentialLike<AttestationResponseLike>): AttestationJSON {
  const response = credential.response;
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

export function assertionJSON(credential: CredentialLike<AssertionResponseLike>): AssertionJSON {
  const response = credential.response;
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
