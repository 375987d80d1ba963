/** Where to go after signing in: only a console path (never another site: an open redirect). */
export function safeNext(next: string | undefined): string {
  if (next && next.startsWith('/console/') && !next.startsWith('//') && !next.includes('\\')) return next;
  return '/console/';
}
