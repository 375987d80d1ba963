/**
 * express-openapi-validator 5.6 compiles every route's request schemas, and each documented
 * status of its responses, with the whole document's `paths` and `components` attached, so that
 * ajv can resolve `$ref`s that point into them (openapi.request.validator.js `Validator`,
 * openapi.response.validator.js `buildValidators`). ajv walks everything attached on each compile
 * (`getSchemaRefs`): each compile cost a walk of the whole document, much of the CPU of an API
 * test file with response validation on (docs/development.md).
 *
 * Kassa's documents reach the validator dereferenced (src/http/spec.ts `loadDocument`): no `$ref`
 * is left to resolve. For such a document, and a schema without one, the schema is compiled
 * without the attached `paths` and `components`, at the one place both validators compile: the
 * `useAjvCache` export of the validator's util module, which they call through the module object.
 * Anything holding a `$ref` is compiled as before. `schemaCompileScopeActive()` lets a test notice
 * when an upgrade makes this a no-op.
 */
import { createRequire } from 'node:module';

type UseAjvCache = ((ajv: unknown, schema: Record<string, unknown>, key: string) => unknown) & { [SCOPED]?: true };

const SCOPED = Symbol.for('kassa.scopedSchemaCompile');
/** `paths` objects the validator attached, and whether their document holds a `$ref`. */
const holdsRef = new WeakMap<object, boolean>();

function validatorUtil(): { useAjvCache: UseAjvCache } {
  const requireFromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
  return requireFromValidator('./middlewares/util.js') as { useAjvCache: UseAjvCache };
}

function containsRef(value: unknown, seen = new Set<object>()): boolean {
  if (value === null || typeof value !== 'object' || seen.has(value)) return false;
  seen.add(value);
  if (Array.isArray(value)) return value.some((item) => containsRef(item, seen));
  for (const [key, item] of Object.entries(value)) {
    if (key === '$ref' || containsRef(item, seen)) return true;
  }
  return false;
}

function documentHoldsRef(paths: object, components: unknown): boolean {
  let known = holdsRef.get(paths);
  if (known === undefined) {
    known = containsRef(paths) || containsRef(components);
    holdsRef.set(paths, known);
  }
  return known;
}

let installed = false;

export function installSchemaCompileScope(): void {
  if (installed) return;
  installed = true;
  const util = validatorUtil();
  const original = util.useAjvCache;
  if (typeof original !== 'function' || original[SCOPED]) return;
  const scoped: UseAjvCache = (ajv, schema, key) => {
    const { paths, components, ...own } = schema;
    if (paths === null || typeof paths !== 'object' || documentHoldsRef(paths, components) || containsRef(own)) return original(ajv, schema, key);
    return original(ajv, own, key);
  };
  scoped[SCOPED] = true;
  util.useAjvCache = scoped;
}

export function schemaCompileScopeActive(): boolean {
  return validatorUtil().useAjvCache[SCOPED] === true;
}
