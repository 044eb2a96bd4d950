// The span timeline: a trace's timed operations on one shared time axis, children nested under
// their parent span (subagents under the call that started them).

import { h } from "./dom.js";

export function spanTimeline(spans) {
  const start = spans.reduce((low, span) => (BigInt(span.start_ns) < low ? BigInt(span.start_ns) : low), BigInt(spans[0].start_ns));
  const end = spans.reduce((high, span) => (BigInt(span.end_ns) > high ? BigInt(span.end_ns) : high), BigInt(spans[0].end_ns));
  const total = Number(end - start) || 1;
  const children = new Map();
  const ids = new Set(spans.map((span) => span.id));
  for (const span of spans) {
    const parent = span.parent_id && ids.has(span.parent_id) ? span.parent_id : null;
    (children.get(parent) || children.set(parent, []).get(parent)).push(span);
  }
  const rows = [];
  const walk = (parent, depth) => {
    const level = (children.get(parent) || []).sort((a, b) => (BigInt(a.start_ns) < BigInt(b.start_ns) ? -1 : 1));
    for (const span of level) {
      const left = (Number(BigInt(span.start_ns) - start) / total) * 100;
      const width = Math.max(0.3, (Number(BigInt(span.end_ns) - BigInt(span.start_ns)) / total) * 100);
      const bar = h("span", { class: `span-bar kind-${span.kind || "none"}`, title: `${span.name}: ${formatDuration(BigInt(span.end_ns) - BigInt(span.start_ns))}` });
      bar.style.left = `${left}%`;
      bar.style.width = `${width}%`;
      const label = h("span", { class: "span-label" }, span.name);
      label.style.paddingLeft = `${depth * 14}px`;
      rows.push(h("div", { class: "span-row" }, label, h("span", { class: "span-track" }, bar)));
      walk(span.id, depth + 1);
    }
  };
  walk(null, 0);
  return h("details", { class: "spans", id: "span-timeline" },
    h("summary", {}, `Span timeline · ${spans.length} spans over ${formatDuration(end - start)}`),
    h("div", { class: "span-rows" }, rows),
  );
}

function formatDuration(nanoseconds) {
  const ms = Number(nanoseconds) / 1e6;
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`;
}
