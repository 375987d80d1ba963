/**
 * Issue 27, item 11: what a new user reads, held to what Kassa does (the runtime halves are in
 * test/telemetry/send-traces*.test.ts, test/telemetry/metrics.test.ts and test/examples.test.ts).
 * - merchant.yaml no longer says refunds and cancellations are "dashboard only": it names where
 *   they are done today (the admin API and CLI commands that exist) and the console being built;
 * - docs/send-traces.md warns that TRACELOOP_HEADERS is `%20` in Python and a space in Node, and
 *   its commands use each form where it belongs;
 * - the README names every metric where it first uses GET /v1/metrics, with the default
 *   aggregation and what to ask llm.latency_ms for; the telemetry document says the same;
 * - docs/agent-wallet.md shows the command that runs scripts/examples/agent.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createAdminClient, createContext } from '../../scripts/admin/cli.js';
import { buildProgram } from '../../scripts/admin/program.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const oneLine = (text: string) => text.replace(/\s+/g, ' ');

describe('openapi/merchant.yaml: refunds and cancellations', () => {
  const description = oneLine((parseYaml(read('openapi/merchant.yaml')) as { info: { description: string } }).info.description);

  it('are not "dashboard only": the text says where they are done, with commands the CLI has and the console', () => {
    expect(description).not.toMatch(/dashboard[ -]only/i);
    expect(description).toMatch(/refunds and cancellations are not part of this API/i);
    expect(description).toContain('admin API');
    expect(description).toContain('docs/cli.md');
    expect(description).toMatch(/console/i);
    const program = buildProgram(createContext(createAdminClient({ baseUrl: 'http://127.0.0.1:9', token: () => 'unused' }), () => {}));
    const registered = program.commands.flatMap((noun) => noun.commands.map((verb) => `${noun.name()} ${verb.name()}`));
    const named = [...description.matchAll(/`([a-z-]+ [a-z-]+)`/g)].map((m) => m[1]!).filter((c) => /^(order|subscription) /.test(c));
    expect(named).toEqual(expect.arrayContaining(['order refund', 'subscription cancel']));
    for (const command of named) expect(registered, command).toContain(command);
  });
});

describe('docs/send-traces.md: the two TRACELOOP_HEADERS forms', () => {
  const page = read('docs/send-traces.md');

  it('warns that Python wants %20 and Node a real space, and writes each where it belongs', () => {
    const warning = oneLine(page.slice(page.indexOf('**`TRACELOOP_HEADERS` is written differently in Python and Node.**')));
    expect(warning).toMatch(/^\*\*`TRACELOOP_HEADERS` is written differently in Python and Node\.\*\* The Python SDK .*`%20`.* The Node SDK .*real space/);
    const python = page.slice(page.indexOf('## Python'), page.indexOf('## Node'));
    const node = page.slice(page.indexOf('## Node'), page.indexOf('## OpenTelemetry Collector'));
    expect(python).toContain('export TRACELOOP_HEADERS="Authorization=Bearer%20$KASSA_TELEMETRY_KEY"');
    expect(node).toContain('TRACELOOP_HEADERS="Authorization=Bearer $KASSA_TELEMETRY_KEY"');
    expect(node).not.toMatch(/TRACELOOP_HEADERS="?Authorization=Bearer%20/);
  });
});

describe('metrics: names and default aggregation, where a reader first meets them', () => {
  const telemetry = parseYaml(read('openapi/telemetry.yaml')) as { paths: Record<string, { get?: { operationId?: string; parameters?: Array<{ name: string; description: string; schema: { 'x-allowed-values'?: string[] } }> } }> };
  const getMetrics = Object.values(telemetry.paths).find((p) => p.get?.operationId === 'getMetrics')!.get!;
  const metrics = getMetrics.parameters!.find((p) => p.name === 'metric')!.schema['x-allowed-values']!;

  it('the README names every metric and the default aggregation right after its first GET /v1/metrics, and sends llm.latency_ms to avg or a percentile', () => {
    const readme = read('README.md');
    const first = readme.indexOf('/v1/metrics');
    expect(first).toBeGreaterThan(0);
    const paragraph = oneLine(readme.slice(readme.indexOf('`GET /v1/metrics`', first), readme.indexOf('\n\n', readme.indexOf('`GET /v1/metrics`', first))));
    expect(metrics.length).toBeGreaterThanOrEqual(7);
    for (const metric of metrics) expect(paragraph, metric).toContain(`\`${metric}\``);
    expect(paragraph).toMatch(/`aggregation` is `sum` \(the default\)/);
    expect(paragraph).toMatch(/`llm\.latency_ms` for `avg` or a percentile/);
  });

  it('the telemetry document says the default is sum for every metric and what suits llm.latency_ms', () => {
    const aggregation = oneLine(getMetrics.parameters!.find((p) => p.name === 'aggregation')!.description);
    expect(aggregation).toContain('default `sum` for every metric');
    expect(aggregation).toMatch(/for `llm\.latency_ms` .*ask for `avg` or a percentile/);
  });
});

describe('docs/agent-wallet.md: running scripts/examples/agent.ts', () => {
  it('shows the command with the variables the example reads (test/examples.test.ts runs that very line)', () => {
    const doc = read('docs/agent-wallet.md');
    const line = doc.split('\n').find((l) => l.includes('scripts/examples/agent.ts') && l.includes('npx tsx'));
    expect(line).toBe("KASSA_API_URL=http://localhost:3001 KASSA_AGENT_WALLET_KEY='…' npx tsx scripts/examples/agent.ts");
    const example = read('scripts/examples/agent.ts');
    for (const variable of ['KASSA_API_URL', 'KASSA_AGENT_WALLET_KEY']) expect(example, variable).toContain(variable);
  });
});
