// The pull's credential (src/node/presented-credentials.ts): offered to the image's own registry only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { presentedCredentials } from "../../../src/node/presented-credentials.ts";

const AUTH = {
  username: "",
  password: "",
  auth: Buffer.from("robot:s3cret:with-colon").toString("base64"),
  serverAddress: "",
  identityToken: "",
  registryToken: "",
};

test("the pull's AuthConfig is offered to the image's own registry only, decoded as docker config's auth", () => {
  const lookup = presentedCredentials(AUTH, "Registry.Example.com:5000");
  assert.deepEqual(lookup("registry.example.com:5000", "app"), [{ source: "the pull's credentials", username: "robot", password: "s3cret:with-colon" }]);
  assert.deepEqual(lookup("signatures.example.com", "app"), []);
  assert.deepEqual(lookup("registry.example.com", "app"), []);
  const tokens = presentedCredentials({ ...AUTH, auth: "", identityToken: "refresh", registryToken: "bearer" }, "r.example");
  assert.deepEqual(tokens("r.example", "x"), [{ source: "the pull's credentials", identityToken: "refresh", registryToken: "bearer" }]);
  assert.deepEqual(presentedCredentials(undefined, "r.example")("r.example", "x"), []);
  assert.deepEqual(presentedCredentials({ ...AUTH, auth: "" }, "r.example")("r.example", "x"), []);
});
