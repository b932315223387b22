// The identity of a registry credential in the node proxy's records: a keyed hash (HMAC-SHA256 with a key made
// on the node at first start), so records never hold a credential and a stolen record file cannot be checked
// against guessed passwords. Two Secrets holding the same credentials hash alike, however they spell them.
import { createHmac, createSecretKey, type KeyObject } from "node:crypto";

/** The CRI AuthConfig the kubelet sends with a pull. */
export interface RegistryAuth {
  username: string;
  password: string;
  /** base64 "username:password", as docker config files keep it. */
  auth: string;
  serverAddress: string;
  identityToken: string;
  registryToken: string;
}

/** No credential at all: the pull is anonymous, and its success makes the image usable by every pod. */
export function isAnonymous(a: RegistryAuth | undefined): boolean {
  return !a || (!a.username && !a.password && !a.auth && !a.identityToken && !a.registryToken);
}

/** The user name and password of an AuthConfig: its own fields, else its `auth` (base64 "username:password", as docker config files keep it). */
export function usernameAndPassword(a: RegistryAuth): { username: string; password: string } {
  if (a.username || a.password || !a.auth) return { username: a.username, password: a.password };
  const decoded = Buffer.from(a.auth, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 ? { username: decoded, password: "" } : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export function credentialHash(key: Buffer, a: RegistryAuth): string {
  const { username, password } = usernameAndPassword(a);
  // The server address is left out: the record is already per repository, and kubelets spell it variously.
  const canonical = JSON.stringify([username, password, a.identityToken, a.registryToken]);
  return `hmac-sha256:${createHmac("sha256", hmacKey(key)).update(canonical).digest("hex")}`;
}

// The node's key is one Buffer for the proxy's life: a KeyObject made once spares each pull preparing it again.
const hmacKeys = new WeakMap<Buffer, KeyObject>();

function hmacKey(key: Buffer): KeyObject {
  let k = hmacKeys.get(key);
  if (!k) hmacKeys.set(key, (k = createSecretKey(key)));
  return k;
}
