/** `signing-key rotate`: the Ed25519 key that signs every webhook delivery. */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { CliContext } from './cli.js';

function parseSeconds(value: string): number {
  if (!/^[0-9]{1,10}$/.test(value)) throw new InvalidArgumentError('Expected a number of seconds.');
  return Number(value);
}

export function register(program: Command, ctx: CliContext): void {
  const key = program.command('signing-key').description('The webhook signing key (Ed25519)');

  key
    .command('rotate')
    .description('Make a new key current; the previous one stays published and signing for the grace period')
    .option('--grace-seconds <n>', 'how long the previous key stays published (default 604800 = 7 days; the API checks the range)', parseSeconds)
    .action(async (opts: { graceSeconds?: number }) => {
      const body = opts.graceSeconds === undefined ? {} : { graceSeconds: opts.graceSeconds };
      ctx.print(await ctx.call(ctx.client.POST('/v1/webhooks/signing-key/rotate', { body })));
    });
}
