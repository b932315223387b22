// Kubernetes label selectors (metav1.LabelSelector): matchLabels AND every matchExpression.

export interface LabelSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export function matchesLabelSelector(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const req of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, req.key);
    const value = labels[req.key];
    switch (req.operator) {
      case "In":
        if (!has || !(req.values ?? []).includes(value!)) return false;
        break;
      case "NotIn":
        // As in Kubernetes: a missing key satisfies NotIn.
        if (has && (req.values ?? []).includes(value!)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}

export function describeLabelSelector(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const r of selector.matchExpressions ?? []) {
    if (r.operator === "Exists") parts.push(r.key);
    else if (r.operator === "DoesNotExist") parts.push(`!${r.key}`);
    else parts.push(`${r.key} ${r.operator === "In" ? "in" : "notin"} (${(r.values ?? []).join(",")})`);
  }
  return parts.join(",") || "<everything>";
}
