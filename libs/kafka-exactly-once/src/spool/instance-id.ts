import { randomUUID } from 'crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'fs';
import { join, resolve } from 'path';

/** Characters a publisher instance id may hold: it becomes part of a Kafka transactional id. */
export const INSTANCE_ID_PATTERN = /^[A-Za-z0-9._-]{1,200}$/;

/** File in the spool directory that holds the instance id when the `publisher.instanceId` option is not set. */
export const INSTANCE_ID_FILE = 'publisher-instance-id';

/**
 * The instance id kept in the spool directory: read when the file exists, else created once (random, written to
 * a temporary file, fsynced, renamed, directory fsynced), so that a restart, even after a crash, finds the same
 * id. A spool directory belongs to exactly one publisher instance, so its id does too.
 */
export function spoolInstanceId(directory: string): string {
  const dir = resolve(directory);
  const file = join(dir, INSTANCE_ID_FILE);
  if (existsSync(file)) {
    const id = readFileSync(file, 'utf8').trim();
    if (!INSTANCE_ID_PATTERN.test(id)) {
      throw new Error(
        `${file} does not hold a publisher instance id (letters, digits, ".", "_", "-"; got ${JSON.stringify(id.slice(0, 80))}). ` +
          'Restore it, or delete it to give this instance a new id (an open publishAll transaction of the old id then waits for its timeout).',
      );
    }
    return id;
  }
  mkdirSync(dir, { recursive: true });
  const id = randomUUID();
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, `${id}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dirFd = openSync(dir, 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return id;
}
