/** The library's version, as its package.json says (library-version.spec.ts keeps them equal). */
export const LIBRARY_VERSION = '0.5.0';
