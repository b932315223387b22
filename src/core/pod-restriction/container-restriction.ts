// ContainerRestriction: what a container (init, regular or ephemeral) may look like. `containers` in a
// PodSpecRestriction is a list of alternatives: every container must satisfy at least one entry.
import { compileImageRestrictions } from "./image-restriction.ts";
import { containerSecurityContext, effectiveSecurityContext } from "./security-context-restriction.ts";
import { anyOf, compileStruct, numberField, stringField, stringListField, structField, type FieldSpec, type StructSpec } from "./struct-restriction.ts";
import { checkCollection, COLLECTION_KEYS, compileCollectionRule } from "./restrictions/collection-restriction.ts";
import { describe, finding, readListOrOne, readMapping, type Check, type CompileContext, type RawPath } from "./restrictions/restriction-support.ts";

const httpGet: StructSpec = {
  pointer: true,
  fields: { host: stringField(false), scheme: stringField(false), path: stringField(false) },
};
const tcpSocket: StructSpec = { pointer: true, fields: { host: stringField(false) } };
const exec: StructSpec = { pointer: true, fields: { command: stringListField() } };
const grpc: StructSpec = { pointer: true, fields: { service: stringField(true) } };
const sleep: StructSpec = { pointer: true, fields: { seconds: numberField(false) } };

/** Lifecycle handlers (postStart/preStop) and probes share the handler fields. */
const handler: StructSpec = {
  pointer: true,
  fields: { exec: structField(exec), httpGet: structField(httpGet), tcpSocket: structField(tcpSocket), sleep: structField(sleep) },
};
const probe: StructSpec = {
  pointer: true,
  fields: { exec: structField(exec), httpGet: structField(httpGet), tcpSocket: structField(tcpSocket), grpc: structField(grpc) },
};
const lifecycle: StructSpec = { pointer: true, fields: { postStart: structField(handler), preStop: structField(handler) } };

const portFields: StructSpec = {
  pointer: false,
  fields: {
    hostPort: numberField(false),
    containerPort: numberField(false),
    hostIP: stringField(false),
    protocol: stringField(false),
    name: stringField(false),
  },
};

/** `ports`: every port of the container must satisfy the port restriction; plus the collection rules. */
const ports: FieldSpec = {
  compile(raw, path, cx) {
    const obj = readMapping(raw, path, cx, [...COLLECTION_KEYS, ...Object.keys(portFields.fields)]);
    if (!obj) return undefined;
    const collection = compileCollectionRule(obj, path, cx);
    const rest = Object.fromEntries(Object.entries(obj).filter(([k]) => !(COLLECTION_KEYS as readonly string[]).includes(k)));
    const each = compileStruct(rest, path, cx, portFields);
    const rule = cx.rule(path);
    return (at, ecx, out) => {
      const list = at.value ?? [];
      if (!Array.isArray(list)) {
        out.push(finding(at, rule, `must be a list, got ${describe(at.value)}`));
        return;
      }
      checkCollection(collection, at, list.length, rule, "ports", out);
      if (each) list.forEach((p, i) => each({ value: p, field: `${at.field}[${i}]` }, ecx, out));
    };
  },
};

const imageField: FieldSpec = { compile: compileImageRestrictions };

const securityContext: FieldSpec = {
  compile: (raw, path, cx) => compileStruct(raw, path, cx, containerSecurityContext),
  // The container's effective settings: its own, else the pod's (see security-context-restriction.ts).
  locate: (container, _key, ecx) => effectiveSecurityContext(container, ecx.podSpec),
};

const containerSpec: StructSpec = {
  pointer: false,
  fields: {
    name: stringField(false),
    image: imageField,
    imagePullPolicy: stringField(false),
    ports,
    livenessProbe: structField(probe),
    readinessProbe: structField(probe),
    startupProbe: structField(probe),
    lifecycle: structField(lifecycle),
    securityContext,
  },
};

/** The list of ContainerRestriction alternatives (or a single one), compiled to one check per container. */
export function compileContainerRestrictions(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const alternatives = readListOrOne(raw, path, cx)
    .map(({ raw: item, path: p }) => compileStruct(item, p, cx, containerSpec))
    .filter((c): c is Check => c !== undefined);
  return alternatives.length > 0 ? anyOf(alternatives) : undefined;
}
