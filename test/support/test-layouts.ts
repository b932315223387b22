// The OCI layouts one test file builds (test/support/oci-layout.ts), kept on disk until its `after` hook removes
// them: built alone, or built and pushed into a test registry under one tag.

import { rm } from "node:fs/promises";
import { buildOciLayout, type OciLayout, type OciLayoutOptions } from "./oci-layout.ts";
import type { TestRegistry } from "./registry.ts";
import type { TeardownStep } from "./teardown.ts";

export class TestLayouts {
  readonly #dirs: string[] = [];

  /** buildOciLayout, the layout kept until removals() runs (a function of its own: `const layout = layouts.build`). */
  readonly build = (opts: OciLayoutOptions): OciLayout => {
    const built = buildOciLayout(opts);
    this.#dirs.push(built.layoutDir);
    return built;
  };

  /** A layout with one image tagged `tag`, pushed into `registry` as `repository:tag`. */
  async push(registry: Pick<TestRegistry, "push">, repository: string, tag: string, image: Omit<OciLayoutOptions, "tag" | "dir">): Promise<OciLayout> {
    const built = this.build({ ...image, tag });
    await registry.push(built.layoutDir, tag, repository, tag);
    return built;
  }

  /** Teardown steps (test/support/teardown.ts): one removal per layout built so far. */
  removals(): TeardownStep[] {
    return this.#dirs.map((dir) => () => rm(dir, { recursive: true, force: true }));
  }
}
