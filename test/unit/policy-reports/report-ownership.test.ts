// How a squatted report is described in the Event on the resource and in the log.
import { test } from "node:test";
import assert from "node:assert/strict";
import { describeSquatter, squattedReport } from "../../../src/core/policy-reports/report-ownership.ts";

const UID = "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f";
const OWNER = [{ apiVersion: "v1", kind: "Pod", name: "web-0", uid: UID }];

test("a report is Imprimatur's with its label and an owner reference to the resource, both", () => {
  assert.equal(squattedReport({ labels: { "app.kubernetes.io/managed-by": "imprimatur" }, ownerReferences: OWNER }, UID), undefined);
  assert.deepEqual(squattedReport({ labels: { "app.kubernetes.io/managed-by": "imprimatur" } }, UID), { managedBy: "imprimatur", ownedByResource: false });
  assert.deepEqual(squattedReport({ ownerReferences: OWNER }, UID), { managedBy: undefined, ownedByResource: true });
  assert.deepEqual(squattedReport({ labels: null, ownerReferences: null }, UID), { managedBy: undefined, ownedByResource: false });
});

test("the description names the label it claims and the owner reference it lacks", () => {
  assert.equal(describeSquatter({ managedBy: "kyverno", ownedByResource: true }, "Pod"), 'managed by "kyverno"');
  assert.equal(describeSquatter({ managedBy: "imprimatur", ownedByResource: false }, "Pod"), 'managed by "imprimatur" but has no owner reference to this pod');
  assert.equal(describeSquatter({ managedBy: undefined, ownedByResource: true }, "Pod"), "has no managed-by label");
  assert.equal(
    describeSquatter({ managedBy: undefined, ownedByResource: false }, "Namespace"),
    "has no managed-by label and has no owner reference to this namespace",
  );
});
