/**
 * A model call's conversation, parsed once from its span attributes into chat messages that one
 * component renders. Spellings understood (first that is present wins, per side):
 *
 * - GenAI semantic conventions (current): `gen_ai.system_instructions`, `gen_ai.input.messages`,
 *   `gen_ai.output.messages` — JSON text of `[{role, parts: [{type: text|tool_call|
 *   tool_call_response, …}], finish_reason?}]`;
 * - OpenLLMetry / earlier GenAI conventions, flattened: `gen_ai.prompt.{i}.role|content|
 *   tool_call_id|tool_calls.{j}.id|name|arguments`, `gen_ai.completion.{i}.…|finish_reason`;
 * - OpenLLMetry's older `llm.prompts.{i}.…` / `llm.completions.{i}.…`.
 *
 * Content that is itself JSON of OpenAI-style parts (`[{type: 'text', text}]`) is reduced to its
 * text. Nothing here throws: malformed JSON is shown as the raw text it is.
 */
export type AttributeValue = string | number | boolean | Array<string | number | boolean>;
export type Attributes = Record<string, AttributeValue>;

export interface ToolCall {
  id: string | null;
  name: string;
  /** As sent: JSON text usually. */
  arguments: string | null;
}

export interface ChatMessage {
  role: string;
  content: string | null;
  toolCalls: ToolCall[];
  /** For a tool result: the call it answers. */
  toolCallId: string | null;
  finishReason: string | null;
  /** Sent to the model, or answered by it. */
  side: 'input' | 'output';
}

export interface Conversation {
  messages: ChatMessage[];
  /** Which spelling the messages came from; null when the span carries none. */
  format: 'gen_ai' | 'openllmetry' | 'llm' | null;
}

const text = (v: unknown): string | null => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : null);

function parseJson(raw: unknown): unknown {
  if (typeof raw !== 'string') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** OpenAI-style content parts reduced to their text; other strings as they are. */
function contentText(raw: unknown): string | null {
  const s = text(raw);
  if (s === null) return null;
  const trimmed = s.trimStart();
  if (trimmed.startsWith('[')) {
    const parts = parseJson(s);
    if (Array.isArray(parts) && parts.every((p) => p && typeof p === 'object')) {
      const texts = parts.map((p: { type?: unknown; text?: unknown; content?: unknown }) => text(p.text) ?? text(p.content)).filter((t): t is string => t !== null);
      if (texts.length > 0) return texts.join('\n');
    }
  }
  return s;
}

interface SemconvPart {
  type?: unknown;
  content?: unknown;
  text?: unknown;
  id?: unknown;
  name?: unknown;
  arguments?: unknown;
  response?: unknown;
  result?: unknown;
}

function fromSemconv(raw: unknown, side: 'input' | 'output'): ChatMessage[] | null {
  const parsed = parseJson(raw);
  if (!Array.isArray(parsed)) return null;
  const out: ChatMessage[] = [];
  for (const m of parsed as Array<{ role?: unknown; parts?: unknown; finish_reason?: unknown; content?: unknown }>) {
    if (!m || typeof m !== 'object') continue;
    const role = text(m.role) ?? (side === 'output' ? 'assistant' : 'user');
    const parts = Array.isArray(m.parts) ? (m.parts as SemconvPart[]) : [];
    const texts: string[] = [];
    const toolCalls: ToolCall[] = [];
    let toolCallId: string | null = null;
    for (const p of parts) {
      if (!p || typeof p !== 'object') continue;
      if (p.type === 'tool_call') {
        toolCalls.push({ id: text(p.id), name: text(p.name) ?? 'tool', arguments: p.arguments === undefined ? null : typeof p.arguments === 'string' ? p.arguments : JSON.stringify(p.arguments) });
      } else if (p.type === 'tool_call_response') {
        toolCallId = text(p.id);
        const r = p.response ?? p.result;
        if (r !== undefined) texts.push(typeof r === 'string' ? r : JSON.stringify(r));
      } else {
        const t = text(p.content) ?? text(p.text);
        if (t !== null) texts.push(t);
      }
    }
    if (parts.length === 0 && m.content !== undefined) {
      const t = contentText(m.content);
      if (t !== null) texts.push(t);
    }
    out.push({ role: toolCallId !== null && role === 'user' ? 'tool' : role, content: texts.length > 0 ? texts.join('\n') : null, toolCalls, toolCallId, finishReason: text(m.finish_reason), side });
  }
  return out;
}

/** `prefix.{i}.…` flattened messages, in index order. */
function fromFlattened(attributes: Attributes, prefix: string, side: 'input' | 'output'): ChatMessage[] {
  const byIndex = new Map<number, Map<string, AttributeValue>>();
  const head = `${prefix}.`;
  for (const [key, value] of Object.entries(attributes)) {
    if (!key.startsWith(head)) continue;
    const rest = key.slice(head.length);
    const dot = rest.indexOf('.');
    if (dot <= 0) continue;
    const index = Number(rest.slice(0, dot));
    if (!Number.isInteger(index) || index < 0) continue;
    let fields = byIndex.get(index);
    if (!fields) byIndex.set(index, (fields = new Map()));
    fields.set(rest.slice(dot + 1), value);
  }
  const out: ChatMessage[] = [];
  for (const index of [...byIndex.keys()].sort((a, b) => a - b)) {
    const f = byIndex.get(index)!;
    const calls = new Map<number, { id: string | null; name: string | null; arguments: string | null }>();
    for (const [field, value] of f) {
      const m = /^tool_calls\.(\d+)\.(id|name|arguments)$/.exec(field);
      if (!m) continue;
      const j = Number(m[1]);
      let call = calls.get(j);
      if (!call) calls.set(j, (call = { id: null, name: null, arguments: null }));
      call[m[2] as 'id' | 'name' | 'arguments'] = text(value);
    }
    // Older OpenLLMetry: one function call on the message.
    const fnName = text(f.get('function_call.name'));
    if (fnName !== null && calls.size === 0) calls.set(0, { id: null, name: fnName, arguments: text(f.get('function_call.arguments')) });
    out.push({
      role: text(f.get('role')) ?? (side === 'output' ? 'assistant' : 'user'),
      content: contentText(f.get('content')),
      toolCalls: [...calls.keys()].sort((a, b) => a - b).map((j) => {
        const c = calls.get(j)!;
        return { id: c.id, name: c.name ?? 'tool', arguments: c.arguments };
      }),
      toolCallId: text(f.get('tool_call_id')),
      finishReason: text(f.get('finish_reason')),
      side,
    });
  }
  return out;
}

export function parseConversation(attributes: Attributes): Conversation {
  const input = fromSemconv(attributes['gen_ai.input.messages'], 'input');
  const output = fromSemconv(attributes['gen_ai.output.messages'], 'output');
  if (input !== null || output !== null) {
    const system = parseJson(attributes['gen_ai.system_instructions']);
    const instructions = Array.isArray(system)
      ? system.map((p: SemconvPart) => (p && typeof p === 'object' ? text(p.content) ?? text(p.text) : text(p))).filter((t): t is string => t !== null)
      : typeof attributes['gen_ai.system_instructions'] === 'string' && system === undefined
        ? [attributes['gen_ai.system_instructions']]
        : [];
    const systemMessages: ChatMessage[] = instructions.length > 0 ? [{ role: 'system', content: instructions.join('\n'), toolCalls: [], toolCallId: null, finishReason: null, side: 'input' }] : [];
    return { messages: [...systemMessages, ...(input ?? []), ...(output ?? [])], format: 'gen_ai' };
  }
  const prompts = fromFlattened(attributes, 'gen_ai.prompt', 'input');
  const completions = fromFlattened(attributes, 'gen_ai.completion', 'output');
  if (prompts.length + completions.length > 0) return { messages: [...prompts, ...completions], format: 'openllmetry' };
  const legacy = [...fromFlattened(attributes, 'llm.prompts', 'input'), ...fromFlattened(attributes, 'llm.completions', 'output')];
  if (legacy.length > 0) return { messages: legacy, format: 'llm' };
  return { messages: [], format: null };
}
