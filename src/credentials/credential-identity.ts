// Who is asking, as a cache key: the credentials a lookup would offer for a repository, hashed. A result
// obtained with one pod's pull secret is never handed to a pod that could not have obtained it; the secret
// material itself is never kept.
import { createHash } from "node:crypto";
import type { CredentialLookup } from "./credential.ts";

export function credentialIdentity(repo: { registry: string; repository: string }, lookup: CredentialLookup): string {
  // A lookup's answers depend only on what it is asked (credential.ts): the same lookup (the server's own
  // credentials, on every admission without pull secrets) is hashed once per repository.
  let known = identities.get(lookup);
  if (!known) identities.set(lookup, (known = new Map()));
  const at = `${repo.registry}/${repo.repository}`;
  let identity = known.get(at);
  if (identity !== undefined) return identity;
  const credentials = lookup(repo.registry, repo.repository);
  identity =
    credentials.length === 0
      ? "anonymous"
      : createHash("sha256")
          .update(JSON.stringify(credentials.map((c) => [c.username, c.password, c.identityToken, c.registryToken])))
          .digest("base64url");
  // Bounded: a server that sees many repositories hashes again rather than keeping them all.
  if (known.size >= MAX_REPOSITORIES_PER_LOOKUP) known.clear();
  known.set(at, identity);
  return identity;
}

const MAX_REPOSITORIES_PER_LOOKUP = 1_000;
const identities = new WeakMap<CredentialLookup, Map<string, string>>();
