/** Telemetry's place in the navigation; its pages come with the telemetry explorer. */
import { PageHeader } from '../../components/ui';

export function TelemetryPage() {
  return (
    <>
      <PageHeader title="Telemetry" />
      <p>The telemetry explorer (traces, metrics, projects) will live here.</p>
    </>
  );
}
