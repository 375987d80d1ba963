/** The agent wallet module, wired: admin and runtime services, their handlers, the agent authenticators. */
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { SecretBox } from '../kernel/secrets.js';
import { createAgentWalletAdminHandlers } from './admin.handlers.js';
import { createAgentWalletConsoleHandlers } from './console.handlers.js';
import { AgentWalletAdminService } from './admin.service.js';
import { createAgentWalletHandlers } from './agent-wallet.handlers.js';
import { KnexAgentWalletRepository } from './agent-wallet.repository.js';
import type { ChainConfig } from './chains.js';
import { createAgentAuthenticators } from './request-auth.js';
import { AgentWalletRuntimeService } from './runtime.service.js';

export interface AgentWalletModule {
  /** Wallets, agents, keys, policies and credit (admin API). */
  admin: AgentWalletAdminService;
  /** What authenticated agents do (agent wallet API). */
  runtime: AgentWalletRuntimeService;
  handlers: {
    /** The platform API's agent wallet operations (agent-wallet.yaml). */
    platform: ReturnType<typeof createAgentWalletHandlers>;
    /** The admin API's wallets, agents, policies and credit. */
    admin: ReturnType<typeof createAgentWalletAdminHandlers>;
    /** A member's wallets, agents, policies, credit and history (console document). */
    console: ReturnType<typeof createAgentWalletConsoleHandlers>;
  };
  /** agent-wallet.yaml's security schemes. */
  authenticators: ReturnType<typeof createAgentAuthenticators>;
}

export function createAgentWalletModule(deps: {
  db: Db;
  secretBox: SecretBox;
  clock: Clock;
  /** The public URL agents call: wallet authorization signatures cover it. */
  publicApiUrl: string;
  chains?: readonly ChainConfig[];
}): AgentWalletModule {
  const repo = new KnexAgentWalletRepository(deps.db);
  const admin = new AgentWalletAdminService(repo, deps.secretBox, deps.clock, { chains: deps.chains });
  const runtime = new AgentWalletRuntimeService(repo, deps.secretBox, deps.clock, { chains: deps.chains });
  return {
    admin,
    runtime,
    handlers: {
      platform: createAgentWalletHandlers(runtime, { publicApiUrl: deps.publicApiUrl }),
      admin: createAgentWalletAdminHandlers(admin),
      console: createAgentWalletConsoleHandlers(admin),
    },
    authenticators: createAgentAuthenticators(runtime),
  };
}
