/** Where a payment lives outside Kassa: the processor's own page. Pure, tested. */

const EXPLORERS: Record<string, string> = {
  'eip155:1': 'https://etherscan.io',
  'eip155:11155111': 'https://sepolia.etherscan.io',
  'eip155:8453': 'https://basescan.org',
  'eip155:84532': 'https://sepolia.basescan.org',
  'eip155:137': 'https://polygonscan.com',
  'eip155:80002': 'https://amoy.polygonscan.com',
  'eip155:42161': 'https://arbiscan.io',
  'eip155:421614': 'https://sepolia.arbiscan.io',
  'eip155:10': 'https://optimistic.etherscan.io',
  'eip155:11155420': 'https://sepolia-optimism.etherscan.io',
};

/** A transaction on the chain's block explorer; undefined for a chain without a public explorer (a local chain). */
export function explorerTxUrl(chain: string | undefined, txHash: string | undefined): string | undefined {
  if (!chain || !txHash || !/^0x[0-9a-fA-F]{64}$/.test(txHash)) return undefined;
  const base = EXPLORERS[chain];
  return base ? `${base}/tx/${txHash}` : undefined;
}

export function explorerAddressUrl(chain: string | undefined, address: string | undefined): string | undefined {
  if (!chain || !address || !/^0x[0-9a-fA-F]{40}$/.test(address)) return undefined;
  const base = EXPLORERS[chain];
  return base ? `${base}/address/${address}` : undefined;
}

/** A Stripe object in Stripe's Dashboard (payment intents, charges, subscriptions, customers, disputes, refunds). */
export function stripeDashboardUrl(id: string | null | undefined): string | undefined {
  if (!id) return undefined;
  const kinds: Array<[RegExp, string]> = [
    [/^(pi|ch|py)_/, 'payments'],
    [/^sub_/, 'subscriptions'],
    [/^cus_/, 'customers'],
    [/^(dp|du)_/, 'disputes'],
    [/^re_/, 'refunds'],
  ];
  const kind = kinds.find(([pattern]) => pattern.test(id))?.[1];
  return kind ? `https://dashboard.stripe.com/${kind}/${encodeURIComponent(id)}` : undefined;
}
