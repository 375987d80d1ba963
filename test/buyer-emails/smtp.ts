/**
 * A real SMTP server for the tests (the `smtp-server` package) on a free loopback port: what it
 * received, decoded enough to read the text and HTML parts.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerDataStream } from 'smtp-server';

export interface ReceivedMail {
  from: string;
  to: string[];
  /** The whole message, quoted-printable undone (headers' soft breaks too: read the subject from `subject`). */
  raw: string;
  /** The Subject header as a mail client shows it. */
  subject: string | undefined;
}

/** Undoes quoted-printable (soft breaks, =XX bytes) enough to read the parts. */
export const decodedMail = (raw: string) => Buffer.from(raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');

/**
 * The Subject header as a mail client shows it: folded lines joined, RFC 2047 encoded words
 * (`=?UTF-8?Q?…?=`, `=?UTF-8?B?…?=`, which a subject with `€` or `−` becomes) decoded.
 */
function subjectOf(raw: string): string | undefined {
  const folded = /^Subject: (.*(?:\r?\n[ \t].*)*)/m.exec(raw)?.[1];
  if (folded === undefined) return undefined;
  const bytes = (text: string) => Buffer.from(text, 'latin1').toString('utf8');
  return folded
    .replace(/\r?\n[ \t]/g, ' ')
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?UTF-8\?([QB])\?([^?]*)\?=/gi, (_m, kind: string, text: string) =>
      kind.toUpperCase() === 'B' ? Buffer.from(text, 'base64').toString('utf8') : bytes(text.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_h, h: string) => String.fromCharCode(parseInt(h, 16)))),
    );
}

export async function startSmtp(options: { refuse?: { code: number; message: string } } = {}) {
  const received: ReceivedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(_address, _session, callback) {
      if (options.refuse) return callback(Object.assign(new Error(options.refuse.message), { responseCode: options.refuse.code }));
      callback();
    },
    onData(stream: SMTPServerDataStream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({ from: String(session.envelope.mailFrom && session.envelope.mailFrom.address), to: session.envelope.rcptTo.map((r) => r.address), raw: decodedMail(Buffer.concat(chunks).toString('latin1')), subject: subjectOf(Buffer.concat(chunks).toString('latin1')) });
        callback();
      });
    },
  });
  server.listen(0, '127.0.0.1');
  await once(server.server, 'listening');
  const port = (server.server.address() as AddressInfo).port;
  return { received, url: `smtp://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
