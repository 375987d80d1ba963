/** `postgres://u@h:5432/x` + `other` → `postgres://u@h:5432/other` */
export function databaseUrlFor(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}
