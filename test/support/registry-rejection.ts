// The RegistryError a registry-client call fails with, or a test failure when it succeeds or fails otherwise.
import assert from "node:assert/strict";
import { RegistryError } from "../../src/registry/registry-error.ts";

export async function rejection(promise: Promise<unknown>): Promise<RegistryError> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof RegistryError, `expected a RegistryError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected the call to fail");
}
