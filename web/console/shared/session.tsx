/**
 * The signed-in member: loaded once from `GET /v1/console/session`, replaced by the answer of
 * sign-in, sign-in link and organization switch. Pages ask `can(permission)` to show an action;
 * the API decides anyway.
 */
import { createContext, type ComponentChildren } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import type { components } from '../../../generated/console';
import { consoleApi, setCsrfToken, setUnauthorizedHandler } from './api';

export type ConsoleSession = components['schemas']['ConsoleSession'];
export type Permission = components['schemas']['MemberPermission'];

/** The session of `GET /v1/console/session`'s answer, undefined when it says nobody is signed in. */
export function signedInSession(data: ConsoleSession | components['schemas']['ConsoleSignedOut'] | undefined): ConsoleSession | undefined {
  return data && 'sessionId' in data ? data : undefined;
}

interface SessionState {
  session: ConsoleSession | undefined;
  /** True until the first answer of GET /v1/console/session. */
  loading: boolean;
  setSession(session: ConsoleSession | undefined): void;
  can(permission: Permission): boolean;
}

const SessionContext = createContext<SessionState>({ session: undefined, loading: true, setSession: () => {}, can: () => false });

export function SessionProvider(props: { children: ComponentChildren }) {
  const [session, setSessionState] = useState<ConsoleSession | undefined>();
  const [loading, setLoading] = useState(true);
  const changed = useRef(false);
  const setSession = useCallback((next: ConsoleSession | undefined) => {
    changed.current = true;
    setCsrfToken(next?.csrfToken);
    setSessionState(next);
  }, []);
  useEffect(() => {
    setUnauthorizedHandler(() => setSession(undefined));
    // Signed out is an answer (`{ signedIn: false }`), not a 401: the page loads without a failed request.
    consoleApi.GET('/v1/console/session').then(
      ({ data }) => {
        const current = signedInSession(data?.data);
        // A sign-in (a sign-in link redeemed meanwhile) wins over this first answer.
        if (!changed.current) {
          setCsrfToken(current?.csrfToken);
          setSessionState(current);
        }
        setLoading(false);
      },
      () => setLoading(false),
    );
  }, [setSession]);
  const can = useCallback((permission: Permission) => Boolean(session?.permissions.includes(permission)), [session]);
  return <SessionContext.Provider value={{ session, loading, setSession, can }}>{props.children}</SessionContext.Provider>;
}

export const useSession = () => useContext(SessionContext);
