import { readdirSync, readFileSync, statSync } from 'fs';
import { join, relative } from 'path';

const SOURCES = join(__dirname, '..');

/** Every TypeScript source of the library outside this folder, specs aside. */
function sourcesOutsideTheRoom(dir = SOURCES, found: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (path !== __dirname) sourcesOutsideTheRoom(path, found);
    } else if (name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.endsWith('.generated.ts')) {
      found.push(path);
    }
  }
  return found;
}

/** The lines of `source` that load kafkajs at run time: an import or re-export that is not type-only, a require, an import(). */
function runtimeKafkaJs(source: string): string[] {
  const statements = source.match(/^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]kafkajs(?:\/[^'"]*)?['"]/gm) ?? [];
  const loads = source.match(/\b(?:require|import)\s*\(\s*['"`]kafkajs(?:\/[^'"`]*)?['"`]\s*\)|^\s*import\s*['"]kafkajs(?:\/[^'"]*)?['"]/gm) ?? [];
  return [...statements.filter((s) => !/^\s*(?:import|export)\s+type\b/.test(s)), ...loads].map((s) => s.trim());
}

describe('the Kafka client room', () => {
  it('is the only folder of the library that loads kafkajs at run time', () => {
    const files = sourcesOutsideTheRoom();
    expect(files.length).toBeGreaterThan(100);
    const offenders = files.flatMap((file) => runtimeKafkaJs(readFileSync(file, 'utf8')).map((line) => `${relative(SOURCES, file)}: ${line}`));
    expect(offenders).toEqual([]);
  });

  it('sees each form of a run-time load', () => {
    expect(runtimeKafkaJs("import { Kafka } from 'kafkajs';")).toHaveLength(1);
    expect(runtimeKafkaJs("import { type Admin, logLevel } from 'kafkajs';")).toHaveLength(1);
    expect(runtimeKafkaJs("export { logLevel } from 'kafkajs';")).toHaveLength(1);
    expect(runtimeKafkaJs("const x = require('kafkajs/src/network/requestQueue');")).toHaveLength(1);
    expect(runtimeKafkaJs("const m = await import('kafkajs');")).toHaveLength(1);
    expect(runtimeKafkaJs("import 'kafkajs';")).toHaveLength(1);
    expect(runtimeKafkaJs("import type { KafkaConfig } from 'kafkajs';\nexport type { Message } from 'kafkajs';")).toEqual([]);
  });
});
