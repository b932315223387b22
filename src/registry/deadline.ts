// Waiting on shared work (a lookup several admissions joined) only until this caller's admission deadline.
import { RegistryError } from "./registry-error.ts";

export function withDeadline<T>(promise: Promise<T>, deadline: number): Promise<T> {
  const remaining = deadline - Date.now();
  if (remaining <= 0) return Promise.reject(new RegistryError("timeout", "the admission deadline passed before the registry answered"));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RegistryError("timeout", `the registry did not answer within the admission deadline (${remaining} ms left)`)),
      remaining,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
