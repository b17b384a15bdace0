import { existsSync } from 'fs';
import { join } from 'path';

/** The schemas directory: SCHEMAS_DIR, else schemas/ at the repository root (works from src and from dist). */
export function schemasDirectory(): string {
  if (process.env.SCHEMAS_DIR) return process.env.SCHEMAS_DIR;
  let dir = __dirname;
  for (let i = 0; i < 8; i++) {
    if (existsSync(join(dir, 'schemas', 'payment-requested.v1.avsc'))) return join(dir, 'schemas');
    dir = join(dir, '..');
  }
  return 'schemas';
}
