import { DeadlineExceeded, withDeadline } from '../engine/deadline';
import type { SchemaRegistryError } from '../errors/schema-registry.error';

/**
 * Answers of the registry that never change once given (an id of a schema under a subject; a subject's latest
 * schema as the process writes with it), each looked up once by key and kept: lookups of one key in flight are
 * shared, so that a write that needs an answer not kept yet waits for the lookup under way (the boot's, or another
 * write's) rather than asking again.
 */
export class CachedLookups<T> {
  readonly values = new Map<string, T>();
  private readonly pending = new Map<string, Promise<T>>();

  /** The kept answer, or the one lookup of `key` in flight (started with `lookUp` when there is none). */
  get(key: string, lookUp: () => Promise<T>): Promise<T> {
    const cached = this.values.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    let lookup = this.pending.get(key);
    if (!lookup) {
      lookup = lookUp().then((value) => {
        this.values.set(key, value);
        return value;
      });
      lookup.finally(() => this.pending.delete(key)).catch(() => undefined);
      this.pending.set(key, lookup);
    }
    return lookup;
  }

  /**
   * The kept answer now, when there is one (a write goes on at once, also while the registry is away); else the
   * lookup in flight (one started when there is none), waited for at most `timeoutMs`: it rejects as the lookup
   * does, or with `late()` when the lookup has not answered by then (it runs on, and a later write may find it).
   */
  soon(key: string, lookUp: () => Promise<T>, timeoutMs: number, late: () => SchemaRegistryError): T | Promise<T> {
    const cached = this.values.get(key);
    if (cached !== undefined) return cached;
    return withDeadline(this.get(key, lookUp), timeoutMs).catch((err: unknown) => {
      throw err instanceof DeadlineExceeded ? late() : err;
    });
  }
}
