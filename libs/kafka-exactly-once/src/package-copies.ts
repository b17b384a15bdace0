/**
 * The package ships two builds, CommonJS (`require`) and ES modules (`import`, under esm/). One application must
 * load only one of them: Nest's injection tokens are classes, and two copies of `KafkaExactlyOnceModule`,
 * `EventPublisher` or `KafkaExactlyOnceLifecycle` are two different tokens (an `app.get(EventPublisher)` of the
 * other copy finds nothing) and two sets of KafkaJS fixes, metrics and consumers. Each build records itself here
 * when it loads; the second one to load in a process emits a warning (code KAFKA_EO_DUAL_PACKAGE) that names
 * both, so that the mistake shows at once instead of as an unresolvable dependency later.
 */
const LOADED = Symbol.for('kafka-exactly-once.loaded-builds');

export type PackageBuild = 'commonjs' | 'esm';

type Registry = Map<PackageBuild, string>;

function registry(): Registry {
  const scope = globalThis as unknown as { [LOADED]?: Registry };
  return (scope[LOADED] ??= new Map());
}

/** Records the build that is loading (called once by each entry point of the package). */
export function recordPackageBuild(build: PackageBuild, location: string): void {
  const loaded = registry();
  if (loaded.has(build)) return;
  loaded.set(build, location);
  const other = build === 'esm' ? 'commonjs' : 'esm';
  if (loaded.has(other)) {
    process.emitWarning(
      `kafka-exactly-once is loaded twice in this process, its ${loaded.get('commonjs')} and its ${loaded.get('esm')}: ` +
        'their classes are different Nest injection tokens. Load it one way only: `import` it everywhere (ESM applications) or `require` it everywhere.',
      { code: 'KAFKA_EO_DUAL_PACKAGE' },
    );
  }
}

/** The builds of the package loaded in this process (what a test asserts to prove that it loads one). */
export function loadedPackageBuilds(): PackageBuild[] {
  return [...registry().keys()];
}

// The build this file belongs to: the ES module build has no `module` binding.
if (typeof module === 'undefined') recordPackageBuild('esm', 'ES module build (esm/index.js, for `import`)');
else recordPackageBuild('commonjs', 'CommonJS build (index.js, for `require`)');
