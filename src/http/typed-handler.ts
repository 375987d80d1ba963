/**
 * Types that tie a handler to its generated operation: the request parts it reads and the
 * responses it may return come from `generated/*.ts`, so a spec change that a handler does not
 * follow fails to compile.
 */
import type { Request } from 'express';

type Responses<Op> = Op extends { responses: infer R } ? R : never;
type JsonContent<R> = R extends { content: { 'application/json': infer B } } ? B : undefined;
type SuccessStatus = 200 | 201 | 202 | 204;
type SuccessCodes<Op> = Extract<keyof Responses<Op>, SuccessStatus>;

export type HandlerResult<Op> = {
  [S in SuccessCodes<Op>]: { status: S; body: JsonContent<Responses<Op>[S]>; headers?: Record<string, string> };
}[SuccessCodes<Op>];

type Parameters<Op> = Op extends { parameters: infer P } ? P : never;
type Part<Op, K extends string> = K extends keyof Parameters<Op>
  ? [Exclude<Parameters<Op>[K], undefined>] extends [never]
    ? Record<string, never>
    : Exclude<Parameters<Op>[K], undefined>
  : Record<string, never>;

type Body<Op> = Op extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : Op extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : undefined;

export interface HandlerInput<Op, Auth> {
  params: Part<Op, 'path'>;
  query: Part<Op, 'query'>;
  headers: Part<Op, 'header'>;
  body: Body<Op>;
  auth: Auth;
  requestId: string;
  /** The raw request, for the rare handler that needs more (raw URL for signatures). */
  req: Request;
}

export type Handler<Op, Auth> = (input: HandlerInput<Op, Auth>) => Promise<HandlerResult<Op>>;

/** One handler per operationId of `Ops`. */
export type HandlerMap<Ops, Auth> = { [K in keyof Ops]: Handler<Ops[K], Auth> };

// A handler map as the router sees it once types have done their work.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyHandler = (input: HandlerInput<any, any>) => Promise<{ status: number; body: unknown; headers?: Record<string, string> }>;
