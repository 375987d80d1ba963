/**
 * Why a suite may not run here, written into its name so the skip says why; the run's summary
 * (test/harness/skip-summary-reporter.ts) counts the tests skipped for each reason in one line.
 */
export const SKIP_REASONS = {
  postgresOnly: 'PostgreSQL only: set TEST_DATABASE_URL=postgres://… to run',
  embeddedOnly: 'embedded database only: run without TEST_DATABASE_URL',
  postgresServerBinaries: 'PostgreSQL server binaries only: set TEST_DATABASE_URL and PG_BIN_DIR (or install postgresql) to run',
  chromium: 'needs Chromium at /usr/bin/chromium',
  pythonOpenTelemetry: 'needs Python with opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http: set KASSA_TEST_PYTHON or install them for python3',
} as const;

/** `name (reason)`: the form the reporter finds again. */
export const skippedUnless = (name: string, reason: keyof typeof SKIP_REASONS): string => `${name} (${SKIP_REASONS[reason]})`;
