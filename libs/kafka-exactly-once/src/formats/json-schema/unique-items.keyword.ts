/**
 * JSON Schema's `uniqueItems`, in time linear in the array's size. ajv's own compares every pair of items whose
 * schema does not say they are numbers, strings or booleans (`{"type":"array","uniqueItems":true}` over 100,000
 * small objects is five billion deep comparisons, minutes for one record); this one numbers each item by its value
 * and looks the number up.
 */

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** An error of a keyword as ajv takes it from a validating function's `errors`. */
interface KeywordError {
  keyword: string;
  message: string;
  params: Record<string, unknown>;
}

/** The keyword for `ajv.addKeyword` (once ajv's own is removed), and `reset()`, to call after each validation. */
export interface UniqueItemsKeyword {
  definition: {
    keyword: 'uniqueItems';
    type: 'array';
    schemaType: 'boolean';
    validate: ((schema: boolean, data: unknown[]) => boolean) & { errors?: KeywordError[] | null };
  };
  /** Forgets the numbers given during one validation (they are kept across the arrays of one value, nested ones included). */
  reset(): void;
}

/**
 * A `uniqueItems` for one ajv instance. Its message is ajv's own (`must NOT have duplicate items (items ## 0 and 3
 * are identical)`), naming the first item that repeats an earlier one.
 */
export function uniqueItemsKeyword(): UniqueItemsKeyword {
  let identities: JsonIdentities | undefined;
  const validate: UniqueItemsKeyword['definition']['validate'] = (schema, data) => {
    if (!schema || data.length < 2) return true;
    identities ??= new JsonIdentities();
    const firstAt = new Map<number, number>();
    for (let i = 0; i < data.length; i++) {
      const id = identities.of(data[i]);
      const j = firstAt.get(id);
      if (j !== undefined) {
        validate.errors = [{ keyword: 'uniqueItems', message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)`, params: { i, j } }];
        return false;
      }
      firstAt.set(id, i);
    }
    return true;
  };
  return {
    definition: { keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', validate },
    reset: () => {
      identities = undefined;
    },
  };
}

/**
 * Numbers JSON values so that two values get one number exactly when JSON Schema calls them equal: objects by
 * their members in any order, arrays by their items in order, numbers by their value. A container is numbered once,
 * from its children's numbers (never by comparing it with another), and remembered, so a value costs time linear
 * in its size (and the sorting of each object's keys) however many checked arrays hold it.
 */
export class JsonIdentities {
  // One counter for every kind, so that a number never stands for two values. Primitives are looked up by
  // themselves (no key text to build), containers by a text of their children's numbers.
  private next = 0;
  private readonly strings = new Map<string, number>();
  private readonly numbers = new Map<number | bigint, number>();
  private readonly others = new Map<unknown, number>();
  private readonly containers = new Map<string, number>();
  // Kept for one validation only (reset() drops the whole object), so a plain Map, cheaper than a WeakMap.
  private readonly byContainer = new Map<object, number>();

  of(value: unknown): number {
    if (typeof value !== 'object' || value === null) return this.primitive(value);
    const known = this.byContainer.get(value);
    if (known !== undefined) return known;
    // Most items hold only primitives, or containers numbered already: numbered at once.
    const key = this.keyOf(value, false);
    if (key !== undefined) return this.numbered(value, key);
    // Children before their parent, with a stack of our own: the value's nesting is bounded only by the reader's
    // maxDepth, which an application may raise far beyond what a call stack holds.
    const stack: Array<{ node: object; expanded: boolean }> = [{ node: value, expanded: false }];
    const entered = new Set<object>();
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      if (!top.expanded) {
        top.expanded = true;
        entered.add(top.node);
        forEachChild(top.node, (child) => {
          if (typeof child === 'object' && child !== null && !this.byContainer.has(child) && !entered.has(child)) stack.push({ node: child, expanded: false });
        });
      } else {
        stack.pop();
        if (!this.byContainer.has(top.node)) this.numbered(top.node, this.keyOf(top.node, true)!);
      }
    }
    return this.byContainer.get(value)!;
  }

  private numbered(node: object, key: string): number {
    const id = this.idIn(this.containers, key);
    this.byContainer.set(node, id);
    return id;
  }

  /** A primitive's number: strings by their text, numbers and bigints by their mathematical value, the rest as themselves. */
  private primitive(value: unknown): number {
    if (typeof value === 'string') return this.idIn(this.strings, value);
    if (typeof value === 'number') {
      // -0 and 0 are one number; a double beyond 2^53 is an integer, one with the bigint of its value.
      if (Number.isInteger(value) && !Number.isSafeInteger(value)) return this.idIn(this.numbers, BigInt(value));
      return this.idIn(this.numbers, value === 0 ? 0 : value);
    }
    if (typeof value === 'bigint') return this.idIn(this.numbers, value >= -MAX_SAFE && value <= MAX_SAFE ? Number(value) : value);
    return this.idIn(this.others, value);
  }

  private idIn<K>(map: Map<K, number>, key: K): number {
    let id = map.get(key);
    if (id === undefined) {
      id = this.next++;
      map.set(key, id);
    }
    return id;
  }

  /**
   * A container's key from its children's numbers: undefined when a child container is not numbered yet, unless
   * `always` (then only a cycle, which JSON has not, leaves one unnumbered: it gets a number of its own).
   */
  private keyOf(node: object, always: boolean): string | undefined {
    let key = Array.isArray(node) ? '[' : '{';
    let complete = true;
    forEachChild(node, (child, name) => {
      let id: number | undefined;
      if (typeof child !== 'object' || child === null) id = this.primitive(child);
      else id = this.byContainer.get(child) ?? (always ? this.next++ : undefined);
      if (id === undefined) complete = false;
      // A member's name is written after its length, so that no name can pass for another member.
      else key += name === undefined ? `${id},` : `${name.length}:${name}=${id},`;
    });
    return complete ? key : undefined;
  }
}

/** Each item of an array in order, or each member of an object in the order of its names (members compare in any order). */
function forEachChild(node: object, visit: (child: unknown, name?: string) => void): void {
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) visit(node[i]);
    return;
  }
  const record = node as Record<string, unknown>;
  const names = Object.keys(record);
  if (names.length > 1) names.sort();
  for (let i = 0; i < names.length; i++) visit(record[names[i]], names[i]);
}
