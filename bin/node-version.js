// The Node.js version check of bin/imprimatur.js, in a module of its own so that it can be tested.
// Plain JavaScript that old versions of Node.js parse too: its job is to explain that they are too old.

/** The Node.js major version imprimatur needs: its package.json "engines" (">=24"), for type stripping. */
export const REQUIRED_NODE_MAJOR = 24;

/**
 * Why this Node.js cannot run imprimatur, as one line saying what to do, or undefined when it can.
 * @param {string} version the running version without "v", as in process.versions.node: "20.20.2"
 * @returns {string | undefined}
 */
export function nodeVersionProblem(version) {
  if (Number.parseInt(version, 10) >= REQUIRED_NODE_MAJOR) return undefined;
  return (
    "imprimatur needs Node.js " +
    REQUIRED_NODE_MAJOR +
    " or newer (this is " +
    version +
    "); " +
    'run it through "npx imprimatur" after "npm ci", which installs Node.js ' +
    REQUIRED_NODE_MAJOR +
    ' from the "node" package, or install Node.js ' +
    REQUIRED_NODE_MAJOR
  );
}
