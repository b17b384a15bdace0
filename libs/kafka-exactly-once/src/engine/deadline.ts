/** A call to Kafka or PostgreSQL did not answer in time; what it did meanwhile is unknown. */
export class DeadlineExceeded extends Error {
  constructor(ms: number, what = 'Kafka') {
    super(`${what} did not answer within ${ms} ms`);
    this.name = 'DeadlineExceeded';
  }
}

/** `promise`, or a DeadlineExceeded rejection after `ms` (the promise itself runs on). The library's one promise timeout. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what?: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new DeadlineExceeded(ms, what)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}
