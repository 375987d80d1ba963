/**
 * The EIP-712 digest of validated typed data: viem's `hashTypedData`, step for step, with the
 * domain separator remembered. A domain separator depends only on the EIP712Domain field list and
 * the domain's values, agents sign for a handful of domains (a token contract per chain), and it
 * is most of the hashing work (its type hash and its string fields are each a keccak in
 * JavaScript). Pure: the cache holds hashes of public values, nothing about who may sign what.
 */
import { concat, getTypesForEIP712Domain, hashDomain, hashStruct, keccak256, validateTypedData, type Hex } from 'viem';
import type { ViemTypedData } from './typed-data.js';

const CACHE_LIMIT = 1_000;
const domainSeparators = new Map<string, Hex>();

/** Domain values are strings and bigints; an object stands for a bigint, so the two never collide. */
const jsonWithBigInt = (_key: string, value: unknown) => (typeof value === 'bigint' ? { bigint: value.toString() } : value);

/** keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(message)): what the wallet signs. */
export function hashTypedDataCached(typedData: ViemTypedData): Hex {
  const { domain, message, primaryType } = typedData;
  // As viem's hashTypedData: the declared EIP712Domain (its field order counts) or the one the
  // domain's fields imply, and viem's own runtime checks of values against their types.
  const types = { EIP712Domain: getTypesForEIP712Domain({ domain }), ...typedData.types };
  validateTypedData({ domain, message, primaryType, types } as never);
  const key = JSON.stringify([types.EIP712Domain, domain], jsonWithBigInt);
  let separator = domainSeparators.get(key);
  if (separator === undefined) {
    separator = hashDomain({ domain, types } as never);
    if (domainSeparators.size >= CACHE_LIMIT) domainSeparators.delete(domainSeparators.keys().next().value!);
    domainSeparators.set(key, separator);
  }
  return keccak256(concat(['0x1901', separator, hashStruct({ data: message, primaryType, types } as never)]));
}
