/**
 * A JSON-RPC proxy in front of a chain node that forwards the first `eth_sendRawTransaction`, lets
 * the node answer it, and then drops the client's connection instead of passing the answer on:
 * a broadcast the node took whose answer is lost. Every other request is passed through.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DroppingProxy {
  url: string;
  /** How many answers were dropped (at most one). */
  dropped: number;
  close(): Promise<void>;
}

/** `target` is read per request, so the proxy can start before the node it fronts. */
export async function droppingProxy(target: () => string): Promise<DroppingProxy> {
  const state: DroppingProxy = { url: '', dropped: 0, close: () => Promise.resolve() };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = await fetch(target(), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      const text = await answer.text();
      if (state.dropped === 0 && body.includes('"eth_sendRawTransaction"')) {
        state.dropped++;
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}
