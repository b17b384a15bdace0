/** Base class of every error the library throws. `retriable` says whether trying again may succeed. */
export abstract class KafkaExactlyOnceError extends Error {
  abstract readonly retriable: boolean;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
