// Free TCP ports on the loopback interface for the end-to-end harnesses.
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";

/**
 * Asks the kernel for a free port on 127.0.0.1 (bind to port 0, read the port, close).
 * The port is free when this resolves, not reserved: a caller that then hands it to another
 * process must be ready to retry with a fresh port if that process reports "address already in use".
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const { port } = server.address() as AddressInfo;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/** `count` distinct free ports (distinct among themselves; see freePort for the caveat). */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}
