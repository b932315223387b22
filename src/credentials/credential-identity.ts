// Who is asking, as a cache key: the credentials a lookup would offer for a repository, hashed. A result
// obtained with one pod's pull secret is never handed to a pod that could not have obtained it; the secret
// material itself is never kept.
import { createHash } from "node:crypto";
import type { CredentialLookup } from "./credential.ts";

export function credentialIdentity(repo: { registry: string; repository: string }, lookup: CredentialLookup): string {
  const credentials = lookup(repo.registry, repo.repository);
  if (credentials.length === 0) return "anonymous";
  return createHash("sha256")
    .update(JSON.stringify(credentials.map((c) => [c.username, c.password, c.identityToken, c.registryToken])))
    .digest("base64url");
}
