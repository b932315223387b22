// One connection pool per API server and TLS identity, for every request the Kubernetes client makes.
import { createHash } from "node:crypto";
import { bufferFromFileOrString, KubeConfig, type RequestContext } from "@kubernetes/client-node";
import type { Dispatcher } from "undici";

/**
 * A KubeConfig whose requests share one undici Agent while the server and TLS material stay the same.
 *
 * @kubernetes/client-node 2.x builds a new Agent in `applySecurityAuthentication`, once per request and per watch:
 * every API call opened a new TLS connection (a TLS context built from the CA and key, a handshake, HTTP/2 set-up)
 * and left it open until the idle timeout. The background scan's 1,000 report writes spent more of the server's time
 * building TLS contexts than judging pods. This keeps the Agent the library made for the first request and hands it
 * to the later ones; the one made for a later request, never used, is closed.
 *
 * The key is what the library's Agent is made from: the cluster (server, proxy, TLS verification and server name)
 * and the CA, client certificate and key as the library reads them for each request (files are read again, so a
 * rotated certificate gets a new Agent; the previous one closes once its requests end). A user whose credentials
 * come from an exec plugin or an auth provider may get a client certificate the kubeconfig does not hold: those
 * keep the library's own behaviour.
 */
export class PooledKubeConfig extends KubeConfig {
  private pooled: { key: string; dispatcher: Dispatcher } | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const made = context.getDispatcher();
    const key = made ? this.tlsIdentity() : undefined;
    if (!made || key === undefined) return;
    if (this.pooled?.key === key) {
      if (made !== this.pooled.dispatcher) void made.close(); // never used: it holds no connection
      context.setDispatcher(this.pooled.dispatcher);
      return;
    }
    const previous = this.pooled?.dispatcher;
    this.pooled = { key, dispatcher: made };
    void previous?.close(); // waits for its requests (a watch runs until it ends) before closing their connections
  }

  /** What the library's Agent for this request is made of, hashed; undefined when not all of it is in the kubeconfig. */
  private tlsIdentity(): string | undefined {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    if (!cluster || (user && (user.exec !== undefined || user.authProvider !== undefined))) return undefined;
    const hash = createHash("sha256");
    for (const part of [
      cluster.server,
      cluster.proxyUrl ?? "",
      String(cluster.skipTLSVerify ?? false),
      cluster.tlsServerName ?? "",
      bufferFromFileOrString(cluster.caFile, cluster.caData) ?? "",
      bufferFromFileOrString(user?.certFile, user?.certData) ?? "",
      bufferFromFileOrString(user?.keyFile, user?.keyData) ?? "",
    ]) {
      hash
        .update(String(Buffer.byteLength(part)))
        .update(":")
        .update(part);
    }
    return hash.digest("hex");
  }
}
