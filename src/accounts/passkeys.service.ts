/**
 * WebAuthn ceremonies through @simplewebauthn/server: options (with a challenge kept
 * server-side, single-use, five minutes), verification of what the browser's authenticator
 * answered (challenge, origin, RP ID, signature, counter), and the user's passkeys. Sessions,
 * throttling and the audit log stay in AccountService, which calls this.
 *
 * The relying party is the merchant listener's public origin (PUBLIC_BASE_URL): its host is the
 * RP ID, its origin the only accepted origin (docs/configuration.md).
 */
import { randomBytes } from 'node:crypto';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import type { AuthenticationResponseJSON, PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { sha256Hex } from '../kernel/secrets.js';
import { conflict, unauthorized, validationError } from '../kernel/errors.js';
import type { Challenge, ChallengePurpose, Passkey, PasskeyRepository } from './passkeys.repository.js';

/** A ceremony's challenge lives five minutes (also the browser's timeout). */
export const CHALLENGE_TTL_MS = 5 * 60_000;
const CHALLENGE_ID = /^kwc_[A-Za-z0-9_-]{43}$/;

export interface RelyingParty {
  /** The host of PUBLIC_BASE_URL. */
  id: string;
  /** The origin of PUBLIC_BASE_URL: the only origin a ceremony is accepted from. */
  origin: string;
  name: string;
}

export function relyingPartyOf(publicBaseUrl: string): RelyingParty {
  const url = new URL(publicBaseUrl);
  return { id: url.hostname, origin: url.origin, name: 'Kassa' };
}

export type RegistrationOptions = { challengeId: string; publicKey: PublicKeyCredentialCreationOptionsJSON };
export type AuthenticationOptions = { challengeId: string; publicKey: PublicKeyCredentialRequestOptionsJSON };

const base64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

/** The WebAuthn user handle of a user: their id's bytes (no personal data). */
export const userHandleOf = (userId: string) => Buffer.from(userId, 'utf8');

export class PasskeyService {
  constructor(
    private readonly repo: PasskeyRepository,
    private readonly clock: Clock,
    readonly rp: RelyingParty,
  ) {}

  /** AccountService reads organizations' second-factor settings through the same repository. */
  get repository(): PasskeyRepository {
    return this.repo;
  }

  /**
   * A ceremony's options around a fresh random challenge, kept server-side as it travels
   * (base64url, as the browser's clientDataJSON echoes it), under the SHA-256 of a random id.
   */
  private async withChallenge<T extends { challenge: string }>(purpose: ChallengePurpose, userId: string | null, orgId: string | null, make: (challenge: string) => Promise<T>): Promise<{ challengeId: string; publicKey: T }> {
    const now = this.clock.now();
    const challengeId = `kwc_${randomBytes(32).toString('base64url')}`;
    const publicKey = await make(randomBytes(32).toString('base64url'));
    await this.repo.insertChallenge(sha256Hex(challengeId), { purpose, challenge: publicKey.challenge, userId, orgId, createdAt: now, expiresAt: new Date(now.getTime() + CHALLENGE_TTL_MS) });
    return { challengeId, publicKey };
  }

  /** Spends a challenge (before anything is verified: a failed attempt cannot be retried with it). */
  async consume(challengeId: string, purpose: ChallengePurpose): Promise<Challenge | undefined> {
    if (!CHALLENGE_ID.test(challengeId)) return undefined;
    return this.repo.consumeChallenge(sha256Hex(challengeId), purpose, this.clock.now());
  }

  list(userId: string): Promise<Passkey[]> {
    return this.repo.listPasskeys(userId);
  }

  // ---- registration --------------------------------------------------------------------------

  async registrationOptions(user: { id: string; email: string; name: string | null }): Promise<RegistrationOptions> {
    const existing = await this.repo.listPasskeys(user.id);
    return this.withChallenge('registration', user.id, null, (challenge) => generateRegistrationOptions({
      rpName: this.rp.name,
      rpID: this.rp.id,
      userName: user.email,
      userDisplayName: user.name ?? user.email,
      userID: new Uint8Array(userHandleOf(user.id)),
      challenge,
      timeout: CHALLENGE_TTL_MS,
      attestationType: 'none',
      excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
      // A discoverable credential: it signs in without an e-mail address too.
      authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
    }));
  }

  /**
   * Verifies the authenticator's answer to a registration challenge of this user and stores the
   * passkey. Unknown, used, expired and another user's challenges are alike (400); so is an
   * answer from another origin or for another RP ID.
   */
  async register(userId: string, input: { challengeId: string; credential: RegistrationResponseJSON; name?: string }): Promise<Passkey> {
    const challenge = await this.consume(input.challengeId, 'registration');
    if (!challenge || challenge.userId !== userId) throw validationError('The registration challenge is unknown, used or expired: request new options', { field: 'challengeId' });
    let verified;
    try {
      verified = await verifyRegistrationResponse({
        response: input.credential,
        expectedChallenge: challenge.challenge,
        expectedOrigin: this.rp.origin,
        expectedRPID: this.rp.id,
        requireUserVerification: false,
      });
    } catch (error) {
      throw validationError(`The passkey could not be verified: ${reason(error)}`, { field: 'credential' });
    }
    if (!verified.verified) throw validationError('The passkey could not be verified', { field: 'credential' });
    const info = verified.registrationInfo;
    const now = this.clock.now();
    const passkey: Passkey = {
      id: newId('PKY'),
      userId,
      credentialId: info.credential.id,
      publicKey: base64url(info.credential.publicKey),
      counter: info.credential.counter,
      transports: info.credential.transports ?? input.credential.response.transports ?? [],
      deviceType: info.credentialDeviceType,
      backedUp: info.credentialBackedUp,
      name: input.name?.trim() || 'Passkey',
      createdAt: now,
      lastUsedAt: null,
    };
    if ((await this.repo.insertPasskey(passkey)) === 'exists') throw conflict('This passkey is already registered');
    return passkey;
  }

  async remove(userId: string, id: string) {
    return this.repo.deletePasskey(userId, id);
  }

  // ---- authentication ------------------------------------------------------------------------

  /** Options for a passwordless sign-in: no e-mail address, no credential list (discoverable credentials); the same answer for everyone. */
  async signInOptions(): Promise<AuthenticationOptions> {
    return this.withChallenge('sign_in', null, null, (challenge) => generateAuthenticationOptions({ rpID: this.rp.id, challenge, timeout: CHALLENGE_TTL_MS, userVerification: 'required' }));
  }

  /** Options for the second step of a password sign-in: the user's passkeys. */
  async secondFactorOptions(userId: string, orgId: string): Promise<AuthenticationOptions> {
    const passkeys = await this.repo.listPasskeys(userId);
    return this.withChallenge('second_factor', userId, orgId, (challenge) => generateAuthenticationOptions({
      rpID: this.rp.id,
      challenge,
      timeout: CHALLENGE_TTL_MS,
      userVerification: 'preferred',
      allowCredentials: passkeys.map((p) => ({ id: p.credentialId, transports: p.transports })),
    }));
  }

  /**
   * Verifies an assertion against a spent challenge: the passkey must exist (and, for a second
   * factor, be the challenge's user's), the signature, origin, RP ID and counter must hold; the
   * counter moves forwards only, once. Every failure is the same 401.
   */
  async authenticate(challenge: Challenge, credential: AuthenticationResponseJSON): Promise<Passkey> {
    const failed = unauthorized('Passkey sign-in failed: request new options and try again');
    const passkey = await this.repo.findPasskeyByCredentialId(credential.id);
    if (!passkey) throw failed;
    if (challenge.userId !== null && passkey.userId !== challenge.userId) throw failed;
    if (credential.response.userHandle && credential.response.userHandle !== base64url(userHandleOf(passkey.userId))) throw failed;
    let verified;
    try {
      verified = await verifyAuthenticationResponse({
        response: credential,
        expectedChallenge: challenge.challenge,
        expectedOrigin: this.rp.origin,
        expectedRPID: this.rp.id,
        credential: { id: passkey.credentialId, publicKey: Buffer.from(passkey.publicKey, 'base64url'), counter: passkey.counter, transports: passkey.transports },
        requireUserVerification: challenge.purpose === 'sign_in',
      });
    } catch {
      throw failed;
    }
    if (!verified.verified) throw failed;
    if (!(await this.repo.recordUse(passkey.id, passkey.counter, verified.authenticationInfo.newCounter, this.clock.now()))) throw failed;
    return passkey;
  }

  removeExpiredChallenges(before: Date, limit: number): Promise<number> {
    return this.repo.removeExpiredChallenges(before, limit);
  }
}

/** The library's reason, without anything the browser sent. */
function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : 'invalid';
  return message.split('\n')[0]!.replace(/"[^"]*"/g, '…').slice(0, 200);
}
