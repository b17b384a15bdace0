import { readFileSync } from 'fs';
import { join } from 'path';
import { LIBRARY_VERSION } from './library-version';

describe('LIBRARY_VERSION', () => {
  it("is the package's version", () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
    expect(LIBRARY_VERSION).toBe(pkg.version);
  });
});
