// Small manifest builders for end-to-end tests.
export function podYaml(name: string, namespace: string, images: string[], annotations: Record<string, string> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, annotations },
    spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
  });
}
