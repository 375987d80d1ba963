/**
 * The AgentPubkey, AgentTimestamp and AgentSignature security schemes. They are AND'ed in one
 * requirement and only mean something together, so the first one to run verifies all three
 * headers and the others return the identity it computed (memoized per request). For
 * sign-typed-data the same statement also reads the wallet and its policies.
 */
import type { Request } from 'express';
import type { Authenticator } from '../http/openapi-app.js';
import type { AgentAuth, AgentWalletRuntimeService } from './runtime.service.js';

export function createAgentAuthenticators(service: AgentWalletRuntimeService): Record<'AgentPubkey' | 'AgentTimestamp' | 'AgentSignature', Authenticator> {
  const verified = new WeakMap<Request, Promise<AgentAuth>>();
  const authenticate: Authenticator = (req, op) => {
    let identity = verified.get(req);
    if (!identity) {
      identity = service.authenticateRequest(
        {
          method: req.method,
          routePath: op.path,
          publicKey: req.header('x-agent-pubkey'),
          timestamp: req.header('x-agent-timestamp'),
          signature: req.header('x-agent-signature'),
        },
        { withSigning: op.operationId === 'signTypedData' },
      );
      verified.set(req, identity);
    }
    return identity;
  };
  return { AgentPubkey: authenticate, AgentTimestamp: authenticate, AgentSignature: authenticate };
}
