/** The platform app on a loopback port for real OTLP clients, with a log of what each request sent and got. */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Exchange {
  path: string;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  status: number;
  retryAfter: string | undefined;
  responseType: string | undefined;
}

export interface RecordingServer {
  origin: string;
  exchanges: Exchange[];
  /** Called with each finished exchange (a test may move the clock on a 429). */
  onExchange?: (exchange: Exchange) => void;
  close(): Promise<void>;
}

export async function serveRecording(app: (req: IncomingMessage, res: ServerResponse) => void): Promise<RecordingServer> {
  const recording: RecordingServer = {
    origin: '',
    exchanges: [],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = createServer((req, res) => {
    // Read before the app runs: it rewrites a decoded protobuf request's Content-Type.
    const contentType = req.headers['content-type'];
    res.on('finish', () => {
      const exchange: Exchange = {
        path: req.url ?? '',
        contentType,
        contentEncoding: req.headers['content-encoding'],
        status: res.statusCode,
        retryAfter: res.getHeader('retry-after') as string | undefined,
        responseType: res.getHeader('content-type') as string | undefined,
      };
      recording.exchanges.push(exchange);
      recording.onExchange?.(exchange);
    });
    app(req, res);
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  recording.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return recording;
}
