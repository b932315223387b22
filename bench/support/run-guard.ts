// How a benchmark ends when it cannot finish: past its time budget (exit 1) or on SIGINT/SIGTERM (exit 130),
// with its child processes signalled first, so that none outlives it.

/**
 * Installs the watchdog and the signal handlers. `stopChildren` gets SIGKILL from the watchdog and SIGTERM on an
 * interrupt, and must not wait: the process exits right after. The returned function removes both.
 */
export function guardRun(name: string, budgetMs: number, stopChildren: (signal: NodeJS.Signals) => void): () => void {
  const watchdog = setTimeout(() => {
    process.stderr.write(`${name}: still running after ${Math.round(budgetMs / 1000)} s; stopping\n`);
    stopChildren("SIGKILL");
    process.exit(1);
  }, budgetMs);
  const interrupt = () => {
    stopChildren("SIGTERM");
    process.exit(130);
  };
  process.once("SIGINT", interrupt);
  process.once("SIGTERM", interrupt);
  return () => {
    clearTimeout(watchdog);
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
  };
}
