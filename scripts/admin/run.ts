/**
 * One admin CLI invocation: parses `args` (the words after `admin`), runs the command against
 * `client`, prints its result through `out` and a failure's JSON document through `err`, and
 * answers the exit code (0, EXIT_FAILURE, EXIT_USAGE). scripts/admin.ts is this with the process's
 * argv, environment and streams; test/admin-cli-commands.test.ts calls it in-process.
 */
import { type Command, CommanderError } from 'commander';
import { CliError, EXIT_FAILURE, EXIT_USAGE, createContext, type AdminClient } from './cli.js';
import { buildProgram } from './program.js';

/** `admin org` without a verb: name the verbs instead of printing help on stderr. */
function missingCommand(program: Command, args: string[]): CliError {
  let command = program;
  const words = ['admin'];
  for (const arg of args) {
    if (arg.startsWith('-')) continue;
    const sub = command.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!sub) break;
    command = sub;
    words.push(arg);
  }
  const verbs = command.commands.map((c) => c.name()).filter((name) => name !== 'help');
  return new CliError('USAGE_ERROR', `Missing command: ${words.join(' ')} expects one of ${verbs.join(', ')} (see --help).`, null, EXIT_USAGE);
}

function toCliError(err: unknown, program: Command, args: string[]): CliError | undefined {
  if (err instanceof CliError) return err;
  if (err instanceof CommanderError) {
    if (err.exitCode === 0) return undefined; // --help, help <cmd>
    if (err.code === 'commander.help') return missingCommand(program, args);
    return new CliError('USAGE_ERROR', err.message.replace(/^error: /, ''), null, EXIT_USAGE);
  }
  return new CliError('CLI_ERROR', err instanceof Error ? err.message : String(err), null, EXIT_FAILURE);
}

export async function runAdmin(args: string[], io: { client: AdminClient; out: (text: string) => void; err: (text: string) => void }): Promise<number> {
  const program = buildProgram(createContext(io.client, io.out));
  try {
    await program.parseAsync(args, { from: 'user' });
    return 0;
  } catch (err) {
    const failure = toCliError(err, program, args);
    if (!failure) return 0;
    io.err(`${JSON.stringify(failure.toJSON())}\n`);
    return failure.exitCode;
  }
}
