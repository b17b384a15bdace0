import { loadedPackageBuilds, recordPackageBuild } from './package-copies';

describe('the package builds loaded in one process', () => {
  const registry = Symbol.for('kafka-exactly-once.loaded-builds');
  let warn: jest.SpyInstance;

  beforeEach(() => {
    (globalThis as Record<symbol, unknown>)[registry] = undefined;
    warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  it('records one build without a warning, however often it is recorded', () => {
    recordPackageBuild('commonjs', 'CommonJS build');
    recordPackageBuild('commonjs', 'CommonJS build');
    expect(loadedPackageBuilds()).toEqual(['commonjs']);
    expect(warn).not.toHaveBeenCalled();
  });

  it('warns once, naming both, when the second build loads', () => {
    recordPackageBuild('esm', 'ES module build (esm/index.js)');
    recordPackageBuild('commonjs', 'CommonJS build (index.js)');
    recordPackageBuild('esm', 'ES module build (esm/index.js)');
    expect(loadedPackageBuilds()).toEqual(['esm', 'commonjs']);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toMatch(/loaded twice in this process, its CommonJS build \(index\.js\) and its ES module build \(esm\/index\.js\)/);
    expect(warn.mock.calls[0][1]).toEqual({ code: 'KAFKA_EO_DUAL_PACKAGE' });
  });
});
