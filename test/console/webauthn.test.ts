/** The console's WebAuthn conversions (web/console/shared/webauthn-codec.ts): base64url ↔ bytes, options → ArrayBuffers, credential → JSON. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { assertionJSON, attestationJSON, base64urlToBytes, bytesToBase64url, creationOptions, requestOptions } from '../../web/console/shared/webauthn-codec.js';

describe('base64url', () => {
  it('round-trips every length 0–64 and matches Node’s encoder (no padding, - and _)', () => {
    for (let n = 0; n <= 64; n++) {
      const bytes = randomBytes(n);
      const encoded = bytesToBase64url(bytes);
      expect(encoded).toBe(bytes.toString('base64url'));
      expect(Buffer.from(base64urlToBytes(encoded))).toEqual(bytes);
    }
    expect(bytesToBase64url(new Uint8Array([0xfb, 0xff, 0xbf]))).toBe('-_-_');
  });
  it('encodes a view of part of a buffer, not the whole buffer', () => {
    const whole = new Uint8Array([1, 2, 3, 4, 5]);
    expect(bytesToBase64url(whole.subarray(1, 3))).toBe(Buffer.from([2, 3]).toString('base64url'));
    expect(bytesToBase64url(whole.buffer)).toBe(Buffer.from(whole).toString('base64url'));
  });
});

describe('options', () => {
  it('creation: challenge, user id and excluded credentials become bytes; hints are dropped', () => {
    const options = creationOptions({
      challenge: 'AQID',
      rp: { id: 'localhost', name: 'Kassa' },
      user: { id: 'VVNS', name: 'a@example.com', displayName: 'a@example.com' },
      pubKeyCredParams: [{ alg: -7, type: 'public-key' }],
      excludeCredentials: [{ id: 'BAUG', type: 'public-key', transports: ['internal'] }],
      hints: ['client-device'],
    });
    expect([...(options.challenge as Uint8Array)]).toEqual([1, 2, 3]);
    expect(Buffer.from(options.user.id as Uint8Array).toString()).toBe('USR');
    expect([...(options.excludeCredentials![0]!.id as Uint8Array)]).toEqual([4, 5, 6]);
    expect(options.excludeCredentials![0]!.transports).toEqual(['internal']);
    expect('hints' in options).toBe(false);
  });
  it('request: challenge and allowed credentials become bytes; a passwordless request has none', () => {
    const second = requestOptions({ challenge: 'AQID', rpId: 'localhost', allowCredentials: [{ id: 'BAUG', type: 'public-key' }] });
    expect([...(second.allowCredentials![0]!.id as Uint8Array)]).toEqual([4, 5, 6]);
    const passwordless = requestOptions({ challenge: 'AQID', rpId: 'localhost', userVerification: 'required' });
    expect('allowCredentials' in passwordless).toBe(false);
    expect(passwordless.userVerification).toBe('required');
  });
});

describe('credentials', () => {
  const buf = (...b: number[]) => new Uint8Array(b).buffer;
  it('an attestation becomes the JSON the API takes', () => {
    const credential = {
      id: 'BAUG',
      rawId: buf(4, 5, 6),
      type: 'public-key',
      authenticatorAttachment: 'platform',
      getClientExtensionResults: () => ({ credProps: { rk: true } }),
      response: { clientDataJSON: buf(1), attestationObject: buf(2), getTransports: () => ['internal'] },
    } as unknown as Parameters<typeof attestationJSON>[0];
    expect(attestationJSON(credential)).toEqual({
      id: 'BAUG',
      rawId: 'BAUG',
      type: 'public-key',
      authenticatorAttachment: 'platform',
      clientExtensionResults: { credProps: { rk: true } },
      response: { clientDataJSON: 'AQ', attestationObject: 'Ag', transports: ['internal'] },
    });
  });
  it('an assertion becomes the JSON the API takes (userHandle only when given)', () => {
    const credential = {
      id: 'BAUG',
      rawId: buf(4, 5, 6),
      type: 'public-key',
      authenticatorAttachment: null,
      getClientExtensionResults: () => ({}),
      response: { clientDataJSON: buf(1), authenticatorData: buf(2), signature: buf(3), userHandle: null },
    } as unknown as Parameters<typeof assertionJSON>[0];
    expect(assertionJSON(credential)).toEqual({ id: 'BAUG', rawId: 'BAUG', type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: 'AQ', authenticatorData: 'Ag', signature: 'Aw' } });
  });
});
