/**
 * Tiny DOM helpers. Text always goes in as `textContent`: names of runs, ops
 * and kernels come from user code and are never parsed as HTML.
 */

/** An element with a class and, optionally, text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** Remove every child of `node`. */
export function clear(node: Node): void {
  while (node.firstChild) {
    node.removeChild(node.firstChild);
  }
}

/** A `<dl>` of label → value pairs (values are text). */
export function definitionList(pairs: [string, string][], className: string): HTMLDListElement {
  const dl = el('dl', className);
  for (const [label, value] of pairs) {
    dl.appendChild(el('dt', '', label));
    dl.appendChild(el('dd', '', value));
  }
  return dl;
}
