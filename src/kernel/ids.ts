import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** 24 base62 characters from a CSPRNG (~142 bits); rejection sampling keeps it unbiased. */
export function randomToken(length = 24): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix =
  | 'ORG' | 'AKI' | 'WSK' | 'PRD' | 'PRC' | 'PLK' | 'CS' | 'ORD' | 'CUS' | 'SUB' | 'WHE' | 'EVT'
  | 'PRJ' | 'TKI' | 'AGT' | 'KQ' | 'WLT' | 'POL' | 'REQ';

export const newId = (prefix: IdPrefix): string => `${prefix}_${randomToken()}`;
