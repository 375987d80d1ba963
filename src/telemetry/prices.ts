/**
 * The per-model price table used to compute `llm.cost` for model-call spans that arrive without
 * one. Prices are list prices in USD per million tokens (input, output) as published by the
 * vendors for standard (non-batch, non-cached) usage; they go stale, so a deployment overrides or
 * extends them with TELEMETRY_PRICES (config.ts), whose entries win over these.
 *
 * Lookup: the exact model name, else the longest entry that is a prefix of the model followed by
 * `-` (so dated snapshots such as `gpt-4o-2024-08-06` price as `gpt-4o`). A model with no entry
 * gets no computed cost.
 */
export interface ModelPrice {
  /** USD per 1,000,000 input tokens. */
  input: number;
  /** USD per 1,000,000 output tokens. */
  output: number;
}

export const DEFAULT_PRICES: Readonly<Record<string, ModelPrice>> = {
  // OpenAI
  'gpt-4o': { input: 2.5, output: 10 },
  'gpt-4o-mini': { input: 0.15, output: 0.6 },
  'gpt-4.1': { input: 2, output: 8 },
  'gpt-4.1-mini': { input: 0.4, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, output: 0.4 },
  'gpt-4-turbo': { input: 10, output: 30 },
  'gpt-3.5-turbo': { input: 0.5, output: 1.5 },
  'gpt-5': { input: 1.25, output: 10 },
  'gpt-5-mini': { input: 0.25, output: 2 },
  'gpt-5-nano': { input: 0.05, output: 0.4 },
  o1: { input: 15, output: 60 },
  'o1-mini': { input: 1.1, output: 4.4 },
  o3: { input: 2, output: 8 },
  'o3-mini': { input: 1.1, output: 4.4 },
  'o4-mini': { input: 1.1, output: 4.4 },
  // Anthropic
  'claude-opus-4-1': { input: 15, output: 75 },
  'claude-opus-4': { input: 15, output: 75 },
  'claude-sonnet-4-5': { input: 3, output: 15 },
  'claude-sonnet-4': { input: 3, output: 15 },
  'claude-3-7-sonnet': { input: 3, output: 15 },
  'claude-3-5-sonnet': { input: 3, output: 15 },
  'claude-haiku-4-5': { input: 1, output: 5 },
  'claude-3-5-haiku': { input: 0.8, output: 4 },
  'claude-3-haiku': { input: 0.25, output: 1.25 },
  'claude-3-opus': { input: 15, output: 75 },
  // Google
  'gemini-2.5-pro': { input: 1.25, output: 10 },
  'gemini-2.5-flash': { input: 0.3, output: 2.5 },
  'gemini-2.0-flash': { input: 0.1, output: 0.4 },
  'gemini-1.5-pro': { input: 1.25, output: 5 },
  'gemini-1.5-flash': { input: 0.075, output: 0.3 },
  // Mistral
  'mistral-large': { input: 2, output: 6 },
  'mistral-small': { input: 0.1, output: 0.3 },
};

/** Where a price of the effective table comes from. */
export type PriceSource = 'default' | 'deployment' | 'project';

export interface PriceEntry extends ModelPrice {
  model: string;
  source: PriceSource;
}

export class PriceTable {
  private readonly entries: Map<string, ModelPrice>;
  private readonly sources: Map<string, PriceSource>;
  private readonly cache = new Map<string, ModelPrice | null>();

  constructor(overrides: Record<string, ModelPrice> = {}, base: ReadonlyMap<string, PriceEntry> | undefined = undefined, source: PriceSource = 'deployment') {
    const start: Array<[string, PriceEntry]> = base
      ? [...base]
      : Object.entries(DEFAULT_PRICES).map(([model, p]) => [model, { model, ...p, source: 'default' as const }]);
    const all = new Map<string, PriceEntry>(start);
    for (const [model, p] of Object.entries(overrides)) all.set(model, { model, input: p.input, output: p.output, source });
    this.entries = new Map([...all].map(([model, e]) => [model, { input: e.input, output: e.output }]));
    this.sources = new Map([...all].map(([model, e]) => [model, e.source]));
  }

  /** This table with a project's overrides on top (they win); this table itself is unchanged. */
  withProjectPrices(prices: Array<{ model: string } & ModelPrice>): PriceTable {
    if (prices.length === 0) return this;
    return new PriceTable(Object.fromEntries(prices.map((p) => [p.model, { input: p.input, output: p.output }])), this.list(), 'project');
  }

  /** Every entry with where it comes from, by model name. */
  list(): Map<string, PriceEntry> {
    const out = new Map<string, PriceEntry>();
    for (const model of [...this.entries.keys()].sort()) out.set(model, { model, ...this.entries.get(model)!, source: this.sources.get(model)! });
    return out;
  }

  lookup(model: string): ModelPrice | undefined {
    const cached = this.cache.get(model);
    if (cached !== undefined) return cached ?? undefined;
    let found = this.entries.get(model);
    if (!found) {
      let best = '';
      for (const [name, price] of this.entries) {
        if (name.length > best.length && model.startsWith(`${name}-`)) {
          best = name;
          found = price;
        }
      }
    }
    // Model names come from clients; bound the memo so it cannot grow without limit.
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(model, found ?? null);
    return found;
  }

  /** USD for the tokens of one call, or undefined when the model has no price. */
  cost(model: string, tokensInput: number | undefined, tokensOutput: number | undefined): number | undefined {
    const price = this.lookup(model);
    if (!price) return undefined;
    return ((tokensInput ?? 0) * price.input + (tokensOutput ?? 0) * price.output) / 1_000_000;
  }
}
