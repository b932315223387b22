// What record-store-crash.test.ts and its child process agree on: the state before, and the pull and prune the
// child makes.
const REPO = "registry.example.com/private/app";
const ref = (c: string) => `sha256:${c.repeat(64)}`;
const hash = (c: string) => `hmac-sha256:${c.repeat(64)}`;

export const CRASH = {
  /** Recorded before: must survive every crash as it was. */
  kept: { imageRef: ref("a"), repository: REPO, hash: hash("1"), pod: { namespace: "team", name: "kept", uid: "uid-kept" } },
  /** Recorded before, image gone: pruned by the child (or still there if it died first). */
  gone: { imageRef: ref("c"), repository: REPO, hash: hash("3"), pod: { namespace: "team", name: "gone", uid: "uid-gone" } },
  /** Preloaded, image gone: its entry expires in the child's prune. */
  expired: { imageRef: ref("e"), repository: "registry.example.com/base/old" },
  /** Preloaded and still present. */
  preloaded: { imageRef: ref("f"), repository: "registry.example.com/base/new" },
  /** The child's pull, with a credential. */
  pulled: {
    image: `${REPO}:v2`,
    imageRef: ref("b"),
    repository: REPO,
    hash: hash("2"),
    pod: { namespace: "team", name: "puller", uid: "uid-puller" },
  },
  present: [ref("a"), ref("b"), ref("f")],
  /** What the child's pull was verified as (verification at pull time), and the record kept from before. */
  verified: { digest: `sha256:${"9".repeat(64)}`, policyGeneration: "sha256:generation" },
};
