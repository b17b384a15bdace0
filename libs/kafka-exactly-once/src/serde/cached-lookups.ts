import { SchemaRegistryError } from '../errors/schema-registry.error';

/**
 * Answers of the registry that never change once given (an id of a schema under a subject; a subject's latest
 * schema as the process writes with it), each looked up once by key and kept: lookups of one key in flight are
 * shared, and the last failure is kept, so that the synchronous side (`now`, while encoding) says why there is no
 * answer yet and starts a lookup, and a later write finds it once the registry answers.
 */
export class CachedLookups<T> {
  readonly values = new Map<string, T>();
  private readonly pending = new Map<string, Promise<T>>();
  private readonly failures = new Map<string, SchemaRegistryError>();

  /** The kept answer, or the one lookup of `key` in flight (started with `lookUp` when there is none). */
  get(key: string, lookUp: () => Promise<T>): Promise<T> {
    const cached = this.values.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    let lookup = this.pending.get(key);
    if (!lookup) {
      lookup = lookUp().then(
        (value) => {
          this.failures.delete(key);
          this.values.set(key, value);
          return value;
        },
        (err: unknown) => {
          if (err instanceof SchemaRegistryError) this.failures.set(key, err);
          throw err;
        },
      );
      lookup.finally(() => this.pending.delete(key)).catch(() => undefined);
      this.pending.set(key, lookup);
    }
    return lookup;
  }

  /** The kept answer now, or the last lookup's failure (`notYet()` while the first is under way), a lookup started meanwhile. */
  now(key: string, lookUp: () => Promise<T>, notYet: () => SchemaRegistryError): T {
    const cached = this.values.get(key);
    if (cached !== undefined) return cached;
    void this.get(key, lookUp).catch(() => undefined);
    throw this.failures.get(key) ?? notYet();
  }
}
