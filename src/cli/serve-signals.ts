// The signals `serve` answers, caught from the moment the command starts rather than once it is serving. Start-up
// can take a while (the first list of namespaces, the shared Secret with the certificate), and a signal without a
// handler then does the wrong thing: as PID 1 in a container SIGTERM is ignored until the kubelet's SIGKILL, and
// SIGHUP's default action ends the process.

export type StopSignal = "SIGTERM" | "SIGINT";

const STOP_SIGNALS: readonly StopSignal[] = ["SIGTERM", "SIGINT"];

/** Thrown by `ServeSignals.during` when a stop signal arrives before the step it waits for is done. */
export class StartupStopped extends Error {
  readonly signal: StopSignal;

  constructor(signal: StopSignal) {
    super(`${signal} during start-up`);
    this.name = "StartupStopped";
    this.signal = signal;
  }
}

export class ServeSignals {
  private stopSignal: StopSignal | undefined;
  private readonly stopWaiters = new Set<(signal: StopSignal) => void>();
  private readonly stopController = new AbortController();
  /** A SIGHUP that arrived before serving: one reload once serving. */
  private reloadPending = false;
  private reload: (() => void) | undefined;
  private readonly onStop = (signal: StopSignal) => {
    // The first one stops gracefully; a second one gets the default action again, as a forced stop.
    for (const s of STOP_SIGNALS) process.off(s, this.onStop);
    if (this.stopSignal !== undefined) return;
    this.stopSignal = signal;
    // Stopping: a SIGHUP no longer reloads (and, still caught, does not end the process either).
    this.reload = () => undefined;
    this.reloadPending = false;
    for (const waiter of this.stopWaiters) waiter(signal);
    this.stopWaiters.clear();
    this.stopController.abort(new StartupStopped(signal));
  };
  private readonly onHangup = () => {
    if (this.reload) this.reload();
    else this.reloadPending = true;
  };

  constructor() {
    for (const signal of STOP_SIGNALS) process.on(signal, this.onStop);
    process.on("SIGHUP", this.onHangup);
  }

  /** The stop signal received so far, if any. */
  get stopRequested(): StopSignal | undefined {
    return this.stopSignal;
  }

  /** Aborted by the first SIGTERM or SIGINT (reason: StartupStopped), for start-up steps that can give up and clean up. */
  get stopping(): AbortSignal {
    return this.stopController.signal;
  }

  /** Resolves with the first SIGTERM or SIGINT (at once when one has already arrived). */
  stopped(): Promise<StopSignal> {
    if (this.stopSignal !== undefined) return Promise.resolve(this.stopSignal);
    return new Promise((resolve) => this.stopWaiters.add(resolve));
  }

  /**
   * Waits for a start-up step, or throws StartupStopped as soon as a stop signal arrives. The step itself goes on;
   * when it later yields something that holds resources (a listener, watches), `abandon` releases it.
   */
  async during<T>(step: Promise<T>, abandon?: (late: T) => unknown): Promise<T> {
    if (this.stopSignal !== undefined) {
      step.then(abandon, () => undefined).catch(() => undefined);
      throw new StartupStopped(this.stopSignal);
    }
    let waiter: ((signal: StopSignal) => void) | undefined;
    const stop = new Promise<never>((_, reject) => {
      waiter = (signal) => reject(new StartupStopped(signal));
      this.stopWaiters.add(waiter);
    });
    try {
      return await Promise.race([step, stop]);
    } catch (e) {
      if (e instanceof StartupStopped) step.then(abandon, () => undefined).catch(() => undefined);
      throw e;
    } finally {
      this.stopWaiters.delete(waiter!);
    }
  }

  /** Serving from now on: SIGHUP calls `reload`, and a SIGHUP received during start-up calls it once now. */
  serving(reload: () => void): void {
    if (this.stopSignal !== undefined) return;
    this.reload = reload;
    if (this.reloadPending) {
      this.reloadPending = false;
      reload();
    }
  }

  /**
   * Gives the signals back to their default handling; once stopping, SIGHUP stays caught, since the process may
   * take a moment more to exit (a start-up step it abandoned).
   */
  dispose(): void {
    for (const signal of STOP_SIGNALS) process.off(signal, this.onStop);
    if (this.stopSignal === undefined) process.off("SIGHUP", this.onHangup);
    if (installed === this) installed = undefined;
  }
}

let installed: ServeSignals | undefined;

/** The process's ServeSignals, installed by the first call (main installs it before loading the serve command). */
export function catchServeSignals(): ServeSignals {
  installed ??= new ServeSignals();
  return installed;
}
