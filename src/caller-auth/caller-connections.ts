// The keep-alive connections of authenticated callers, by what each authenticated with. When the client CA or the
// caller tokens change, a connection whose credentials were removed is closed once idle (at once, or after the
// answer it is sending), so a removed caller does not keep a connection it could use later. Every request is
// authenticated anew as well (caller-auth.ts), so one that arrives before the close is refused with 401.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { PresentedCredential } from "./caller-auth.ts";

interface ConnectionState {
  /** Requests read and not yet answered (HTTP/1.1 may pipeline). */
  inFlight: number;
  /** What the last authenticated request on it presented. */
  presented: readonly PresentedCredential[];
}

export class CallerConnections {
  private readonly states = new WeakMap<Socket, ConnectionState>();
  /** The connections that authenticated with some credential, to look through when credentials change. */
  private readonly authenticatedSockets = new Set<Socket>();

  /** Whether the credentials are still configured. */
  private readonly holds: (presented: readonly PresentedCredential[]) => boolean;
  private readonly logger: Logger;

  constructor(holds: (presented: readonly PresentedCredential[]) => boolean, logger: Logger) {
    this.holds = holds;
    this.logger = logger;
  }

  /** Called for every request as it arrives: the connection is busy until its answer is done. */
  requestStarted(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket;
    const state = this.stateOf(socket);
    state.inFlight++;
    res.once("close", () => {
      state.inFlight--;
      if (state.inFlight === 0 && !this.holds(state.presented)) this.close(socket, "after its answer");
    });
  }

  /** Called when a request on `socket` is let in with these credentials. */
  authenticated(socket: Socket, presented: readonly PresentedCredential[]): void {
    if (presented.length === 0) return;
    this.stateOf(socket).presented = presented;
    if (this.authenticatedSockets.has(socket)) return;
    this.authenticatedSockets.add(socket);
    socket.once("close", () => this.authenticatedSockets.delete(socket));
  }

  /** After the client CA or the tokens changed: closes the idle connections whose credentials were removed. */
  credentialsChanged(): void {
    for (const socket of this.authenticatedSockets) {
      const state = this.stateOf(socket);
      if (state.inFlight === 0 && !this.holds(state.presented)) this.close(socket, "idle");
    }
  }

  private stateOf(socket: Socket): ConnectionState {
    let state = this.states.get(socket);
    if (!state) {
      state = { inFlight: 0, presented: [] };
      this.states.set(socket, state);
    }
    return state;
  }

  private close(socket: Socket, when: string): void {
    if (socket.destroyed) return;
    this.authenticatedSockets.delete(socket);
    this.logger.info({ remote: socket.remoteAddress, when }, "closing a caller's connection: its credentials were removed");
    // What was written goes out first; a client that never closes its side is not waited for.
    socket.end(() => socket.destroy());
  }
}
