import { ChildProcess, spawn } from 'child_process';
import { createWriteStream, mkdirSync, openSync, readFileSync } from 'fs';
import { join, resolve } from 'path';
import { REPO_ROOT } from './environment';

/** Which Node.js binary runs the process (the test's own by default) and in which folder (the repository's). */
export interface AppProcessOptions {
  node?: string;
  cwd?: string;
  /** Arguments after the script. */
  args?: string[];
}

/** A demo app running as a child process of the test, with its output in a log file. */
export class AppProcess {
  private exited?: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(
    readonly name: string,
    script: string,
    env: Record<string, string>,
    readonly logFile: string,
    options: AppProcessOptions = {},
  ) {
    mkdirSync(join(logFile, '..'), { recursive: true });
    // Emptied now, not when the stream gets round to opening it: a log of an earlier run must never be read as this one's.
    const log = createWriteStream(logFile, { fd: openSync(logFile, 'w') });
    this.child = spawn(options.node ?? process.execPath, [resolve(REPO_ROOT, script), ...(options.args ?? [])], {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Both into one file: neither ends it (the first to end would cut the other's last lines off).
    this.child.stdout?.pipe(log, { end: false });
    this.child.stderr?.pipe(log, { end: false });
    const closed = new Promise<boolean>((r) => this.child.once('close', () => r(true)));
    // Exited once its last lines are in the log file too: the child's final writes may still be in the pipes when
    // it exits, and tests read the log right after the exit (a SIGKILL's "fault injection" line was missed so).
    // A grandchild holding the pipes open is not waited for beyond a moment.
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code) => {
        const grace = new Promise<boolean>((r) => setTimeout(() => r(false), 2000).unref());
        void Promise.race([closed, grace]).then((all) => (all ? log.end(() => resolve(code)) : log.write(Buffer.alloc(0), () => resolve(code))));
      }),
    );
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  logs(): string {
    try {
      return readFileSync(this.logFile, 'utf8');
    } catch {
      return '';
    }
  }

  /** Waits until the log matches `pattern` (counting from `from` characters in), or the process exits. */
  async waitForLog(pattern: RegExp, timeoutMs = 60000, from = 0): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (pattern.test(this.logs().slice(from))) return;
      if (!this.running) throw new Error(`${this.name} exited before logging ${pattern}; log ${this.logFile}:\n${this.logs().slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${this.name} did not log ${pattern} within ${timeoutMs} ms; log ${this.logFile}:\n${this.logs().slice(-3000)}`);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) process.kill(this.pid, signal);
  }

  /** Resolves with the exit code (null when killed by a signal). */
  async waitForExit(timeoutMs = 60000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.exited as Promise<number | null>,
        new Promise<number | null>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`${this.name} (pid ${this.pid}) did not exit within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL, and wait until it is gone. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.signal('SIGKILL');
    await this.waitForExit(10000);
  }

  /** SIGTERM (graceful), SIGKILL if it does not exit in time. */
  async stop(timeoutMs = 30000): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    this.signal('SIGTERM');
    try {
      return await this.waitForExit(timeoutMs);
    } catch {
      await this.kill();
      return null;
    }
  }
}

/** Processes a suite started, stopped together in afterAll even if a test failed half-way. */
export class ProcessGroup {
  private readonly processes: AppProcess[] = [];

  add<T extends AppProcess>(process: T): T {
    this.processes.push(process);
    return process;
  }

  async killAll(): Promise<void> {
    await Promise.all(this.processes.map((p) => (p.running ? p.kill() : undefined)));
  }
}
