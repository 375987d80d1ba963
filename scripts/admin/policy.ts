/**
 * `policy create|list|delete`: wallet policies (Privy's rules), enforced on every signing request.
 *
 * One shape in and out: `policy create --file` reads a policy as `policy list` and `policy create`
 * print it (`chainType`, `spendLimits`), so a listed policy can be saved and attached elsewhere; the
 * API's request spelling (`chain_type`, `spend_limits`) is accepted too.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { CliError, usageError, type CliContext } from './cli.js';

type WalletPolicyCreate = components['schemas']['WalletPolicyCreate'];
type WalletPolicy = components['schemas']['WalletPolicy'];

/** Fields of a stored policy that are not part of its definition: dropped when it is attached again. */
const STORED_FIELDS = ['id', 'walletId', 'createdAt'] as const;
/** The printed spelling of a field → the API's request spelling. */
const REQUEST_SPELLING: Record<string, string> = { chainType: 'chain_type', spendLimits: 'spend_limits' };

/**
 * One policy of the file as the API's create body. Only the spelling changes; whether the policy is
 * valid is the API's to say, with its precise messages (unknown fields included).
 */
export function toCreateBody(policy: unknown, where: string): WalletPolicyCreate {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw usageError(`${where}: expected a policy object ({"name", "version", "chainType", "rules", …}).`);
  }
  const body: Record<string, unknown> = {};
  const spelledAs = new Map<string, string>();
  for (const [key, value] of Object.entries(policy)) {
    if ((STORED_FIELDS as readonly string[]).includes(key)) continue;
    const name = REQUEST_SPELLING[key] ?? key;
    const earlier = spelledAs.get(name);
    if (earlier !== undefined) throw usageError(`${where}: both ${earlier} and ${key} are given; keep one.`);
    spelledAs.set(name, key);
    body[name] = value;
  }
  return body as WalletPolicyCreate;
}

/** The file's policies: one object, or a list (what `policy list` prints). */
function readPolicyFile(file: string): { list: boolean; bodies: WalletPolicyCreate[] } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw usageError(`Cannot read ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw usageError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) return { list: false, bodies: [toCreateBody(parsed, file)] };
  if (parsed.length === 0) throw usageError(`${file} holds an empty list: no policy to attach.`);
  return { list: true, bodies: parsed.map((policy, i) => toCreateBody(policy, `${file}[${i}]`)) };
}

export function register(program: Command, ctx: CliContext): void {
  const policy = program.command('policy').description('Wallet policies: which typed data the wallet may sign');

  policy
    .command('create')
    .description('Attach the policy of a JSON file (as `policy list` prints it: name, version, chainType, rules, spendLimits); a list attaches each in order')
    .requiredOption('--wallet <id>', 'wallet id (WLT_...)')
    .requiredOption('--file <path>', 'policy JSON file, e.g. scripts/examples/agent-wallet-policy.json')
    .action(async (opts: { wallet: string; file: string }) => {
      const { list, bodies } = readPolicyFile(opts.file);
      const created: WalletPolicy[] = [];
      for (const [i, body] of bodies.entries()) {
        try {
          created.push(await ctx.call(ctx.client.POST('/v1/wallets/{id}/policies', { params: { path: { id: opts.wallet } }, body })));
        } catch (err) {
          // Policies already attached stay attached: say which, so a retry can leave them out.
          if (!list || !(err instanceof CliError)) throw err;
          const done = created.length === 0 ? 'none attached' : `attached before it: ${created.map((p) => p.id).join(', ')}`;
          throw new CliError(err.code, `${opts.file}[${i}]: ${err.message} (${done})`, err.status, err.exitCode);
        }
      }
      ctx.print(list ? created : created[0]);
    });

  policy
    .command('list')
    .description("List a wallet's policies in evaluation order")
    .requiredOption('--wallet <id>', 'wallet id (WLT_...)')
    .action(async (opts: { wallet: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/wallets/{id}/policies', { params: { path: { id: opts.wallet } } })));
    });

  policy
    .command('delete')
    .description('Delete a policy (a wallet without policies denies every signing request)')
    .requiredOption('--policy <id>', 'policy id (POL_...)')
    .action(async (opts: { policy: string }) => {
      ctx.print(await ctx.call(ctx.client.DELETE('/v1/policies/{id}', { params: { path: { id: opts.policy } } })));
    });
}
