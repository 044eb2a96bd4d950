// The section explorer: a trace's steps grouped into tasks and subtasks (GET /traces/{id}/sections), one
// level at a time, with generated titles and 0–1 section scores filled in progressively.
// Keys on the list: ↑/↓ select a row (its span is outlined on the minimap), → or Enter opens it (a section
// without parts opens as its collapsed message rows, a message row opens the trace at that step), ← or
// Escape goes back to the parent with its selection. The left rail holds every step as a destination; the
// focused minimap moves step by step with ←/→. A single-task trace lands on that task's parts.

import { get, post } from "./api.js";
import { h, navigate, replace, startScreen } from "./dom.js";
import { loadCompletionRuns } from "./completion.js";
import { drawMinimap } from "./minimap.js";

const BATCH = 4; // the API's most ranges per request
const IN_FLIGHT = 2;
const ROLE_LABELS = { system: "System", user: "User", assistant: "Agent", tool: "Tool result" };

export async function renderSections(screen, session, traceId) {
  const current = startScreen();
  const path = `/traces/${encodeURIComponent(traceId)}`;
  const [trace, tree] = await Promise.all([get(path), get(`${path}/sections`)]);
  if (!current()) return;
  new Explorer(screen, trace, tree.tasks);
}

class Explorer {
  constructor(screen, trace, tasks) {
    this.screen = screen;
    this.trace = trace;
    this.tasks = tasks;
    this.stepIndex = new Map(trace.steps.map((step, index) => [step.id, index]));
    // Every section start is a phase boundary: a stronger tick on the rail.
    this.boundaries = new Set(allSections(tasks).map((section) => this.stepIndex.get(section.first_step_id)));
    this.levels = [this.overview()];
    this.summaries = new Map();
    this.completion = [];
    this.mount();
    this.render();
    this.loadCompletion();
    this.keyHandler = (event) => this.onKey(event);
    document.addEventListener("keydown", this.keyHandler);
  }

  /** The whole-trace level; a single task is only a breadcrumb above its parts (or its steps). */
  overview() {
    const [only] = this.tasks;
    if (this.tasks.length !== 1) return { title: "Whole trace", items: this.tasks.map(sectionItem), selected: 0 };
    return { title: only.title, items: this.itemsOf(only), selected: 0 };
  }

  async loadCompletion() {
    this.completion = await loadCompletionRuns(this.trace.id, this.stepIndex, () => document.body.contains(this.list));
    this.canvas.dataset.completionRuns = String(this.completion.length);
    if (document.body.contains(this.list)) this.drawMaps();
  }

  itemsOf(section) {
    return section.children.length ? section.children.map(sectionItem) : section.step_ids.map((id) => ({ kind: "step", index: this.stepIndex.get(id) }));
  }

  get level() {
    return this.levels[this.levels.length - 1];
  }

  /** What stays mounted across levels: the header, the minimap and the rail (kept during a drag). */
  mount() {
    const tracePath = `/traces/${encodeURIComponent(this.trace.id)}`;
    this.canvas = h("canvas", { class: "minimap", id: "sections-minimap", height: "48", tabindex: "0", "aria-label": "The whole trace: the selected row's span is outlined; click a step to go there, ←/→ move step by step" });
    this.railCanvas = h("canvas", { class: "section-rail", id: "section-rail", "aria-label": "Every step of the trace; phase boundaries are the stronger ticks" });
    this.crumbs = h("nav", { class: "breadcrumbs", id: "breadcrumbs", "aria-label": "Section path" });
    this.list = h("div", { class: "section-list", id: "section-list", role: "listbox", tabindex: "0", "aria-label": "Sections" });
    this.tooltip = h("div", { class: "score-tooltip", id: "score-tooltip", role: "tooltip", hidden: true });
    replace(
      this.screen,
      h("header", { class: "screen-head" },
        h("div", {},
          h("a", { href: tracePath, "data-link": "", class: "back" }, "← The trace"),
          h("h1", {}, `Sections of ${this.trace.title || "(untitled)"}`),
          this.crumbs,
        ),
      ),
      // The credit graph is left out when no action has a grade.
      h("div", { class: "minimap-bar", hidden: !this.trace.steps.some((step) => step.metadata.reward) }, this.canvas),
      h("p", { class: "hint explorer-hint" }, "↑/↓ select · → or Enter opens · ← or Escape goes back · the rail and the minimap go to any step. Scores are the fast model's 0–1 estimate of success at each section's own objective; hover one for its objective and reason."),
      h("div", { class: "explorer-body" },
        h("div", { class: "rail-column" },
          h("button", { class: "rail-overview", id: "rail-overview", title: "The whole-trace overview", "aria-label": "The whole-trace overview", onclick: () => this.toOverview() }),
          this.railCanvas,
        ),
        this.list,
      ),
      this.tooltip,
    );
    this.bindRail();
    this.bindMinimap();
    new ResizeObserver(() => this.drawMaps()).observe(this.railCanvas);
  }

  render({ focus = true } = {}) {
    const depth = this.levels.length - 1;
    replace(this.crumbs, this.levels.map((level, index) =>
      index === depth ? h("span", {}, level.title) : [h("button", { class: "link-button", onclick: () => this.back(index) }, level.title), " › "]),
    depth > 0 ? h("button", { class: "link-button back-to-sections", id: "back-to-sections", onclick: () => this.back(0) }, "Back to sections") : null);
    this.drawRows();
    this.assess(this.level.items.filter((item) => item.kind === "section").map((item) => item.section));
    if (focus) this.list.focus();
  }

  drawRows() {
    const { items, selected } = this.level;
    this.tooltip.hidden = true;
    replace(this.list, items.length ? items.map((item, index) => this.row(item, index === selected, index)) : h("p", { class: "empty" }, "No sections: the trace has no steps."));
    this.drawMaps();
    const row = this.list.children[selected];
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  row(item, selected, index) {
    const attrs = {
      class: `section-row${item.kind === "step" ? " message-row" : ""}${selected ? " selected" : ""}`, role: "option", "aria-selected": String(selected),
      onclick: () => { this.level.selected = index; this.open(); },
      onmouseenter: () => { this.level.selected = index; this.highlight(); },
    };
    return item.kind === "step" ? this.messageRow(attrs, item.index) : this.sectionRow(attrs, item.section);
  }

  sectionRow(attrs, section) {
    const first = this.stepIndex.get(section.first_step_id) + 1;
    const last = this.stepIndex.get(section.last_step_id) + 1;
    const summary = this.summaries.get(rangeKey(section));
    return h("div", { ...attrs, dataset: { firstStep: String(first), kind: section.kind } },
      h("span", { class: "section-title" }, section.title),
      summary && summary.title ? h("span", { class: "hint section-generated" }, summary.title) : null,
      h("span", { class: "spacer" }),
      section.activity ? h("span", { class: "chip" }, section.activity) : null,
      section.children.length ? h("span", { class: "hint" }, `${section.children.length} parts`) : null,
      h("span", { class: "hint" }, first === last ? `step ${first}` : `steps ${first}–${last}`),
      this.scoreBadge(section, summary),
    );
  }

  /** A collapsed message row: one line of the step, opened in the trace view. */
  messageRow(attrs, index) {
    const step = this.trace.steps[index];
    const call = step.tool_name ? `${step.tool_name} ${JSON.stringify(step.tool_input ?? {})}` : "";
    return h("div", { ...attrs, dataset: { step: String(index + 1) } },
      h("span", { class: "message-number" }, String(index + 1)),
      h("span", { class: "message-role" }, ROLE_LABELS[step.role] || step.role),
      step.tool_name ? h("code", { class: "tool-name" }, step.tool_name) : null,
      h("span", { class: "message-excerpt" }, (step.content || call).replace(/\s+/g, " ").slice(0, 300)),
    );
  }

  /** The 0–1 score; hovering or focusing it shows its objective and reason without opening the section. */
  scoreBadge(section, summary) {
    if (!section.graded) return this.explained(h("span", { class: "section-score context" }, "context"), "Context only: no agent response or tool call to assess");
    if (!summary) return h("span", { class: "section-score pending" }, "…");
    if (summary.pending) return this.explained(h("span", { class: "section-score pending" }, "assessing…"), "Being assessed");
    if (summary.unavailable || summary.score === null || summary.score === undefined) {
      return this.explained(h("span", { class: "section-score unscored" }, "Unscored"), summary.unavailable_reason || summary.reason || "No evidence to assess");
    }
    return this.explained(h("span", { class: "section-score" }, summary.score.toFixed(2)), [h("strong", {}, "Objective: "), summary.objective || "—", h("br"), h("strong", {}, "Why: "), summary.reason || "—"]);
  }

  explained(badge, why) {
    badge.tabIndex = 0;
    badge.setAttribute("aria-describedby", "score-tooltip");
    const show = () => {
      replace(this.tooltip, why);
      this.tooltip.hidden = false;
      const rect = badge.getBoundingClientRect();
      this.tooltip.style.top = `${rect.bottom + 4}px`;
      this.tooltip.style.left = `${Math.max(8, rect.right - this.tooltip.offsetWidth)}px`;
    };
    const hide = () => (this.tooltip.hidden = true);
    badge.addEventListener("mouseenter", show);
    badge.addEventListener("focus", show);
    badge.addEventListener("mouseleave", hide);
    badge.addEventListener("blur", hide);
    return badge;
  }

  /** Hover moves the selection without rebuilding the rows. */
  highlight() {
    [...this.list.children].forEach((row, index) => {
      row.classList.toggle("selected", index === this.level.selected);
      row.setAttribute("aria-selected", String(index === this.level.selected));
    });
    this.drawMaps();
  }

  /** The selected row's steps as [first, last] indexes. */
  selectedSpan() {
    const item = this.level.items[this.level.selected];
    if (!item) return null;
    if (item.kind === "step") return [item.index, item.index];
    return [this.stepIndex.get(item.section.first_step_id), this.stepIndex.get(item.section.last_step_id)];
  }

  drawMaps() {
    const range = this.selectedSpan();
    const item = this.level.items[this.level.selected];
    drawMinimap(this.canvas, this.trace.steps, { fit: false, range, selected: item && item.kind === "step" ? item.index : -1, completion: this.completion });
    drawRail(this.railCanvas, this.trace.steps.length, this.boundaries, range);
  }

  open() {
    const item = this.level.items[this.level.selected];
    if (!item) return;
    if (item.kind === "section") {
      this.levels.push({ title: item.section.title, items: this.itemsOf(item.section), selected: 0 });
      this.render();
    } else {
      this.close();
      navigate(`/traces/${encodeURIComponent(this.trace.id)}?step=${item.index + 1}`);
    }
  }

  back(depth = this.levels.length - 2) {
    if (depth < 0) return;
    this.levels = this.levels.slice(0, depth + 1);
    this.render();
  }

  toOverview() {
    this.levels = [this.overview()];
    this.render();
    this.list.scrollTop = 0;
  }

  /** Open the recorded step `index` from anywhere: its sections' path, then its message row selected. */
  openStep(index, { focus = true } = {}) {
    const stepId = this.trace.steps[index].id;
    const levels = [this.overview()];
    let item = null;
    while (!item || item.kind === "section") {
      const level = levels[levels.length - 1];
      level.selected = level.items.findIndex((candidate) => (candidate.kind === "step" ? candidate.index === index : candidate.section.step_ids.includes(stepId)));
      item = level.items[level.selected];
      if (!item) break; // the tree does not hold this step: stop at the deepest level that does
      if (item.kind === "section") levels.push({ title: item.section.title, items: this.itemsOf(item.section), selected: 0 });
    }
    if (levels[levels.length - 1].selected < 0) levels[levels.length - 1].selected = 0;
    this.levels = levels;
    this.render({ focus });
  }

  /** Click or drag on the rail: the rail stays mounted, and focus goes back to the list for the arrows. */
  bindRail() {
    const stepAt = (event) => {
      const rect = this.railCanvas.getBoundingClientRect();
      const count = this.trace.steps.length;
      return Math.min(count - 1, Math.max(0, Math.floor(((event.clientY - rect.top) / rect.height) * count)));
    };
    let dragging = false;
    this.railCanvas.addEventListener("pointerdown", (event) => {
      if (!this.trace.steps.length) return;
      dragging = true;
      this.railCanvas.setPointerCapture(event.pointerId);
      this.openStep(stepAt(event), { focus: false });
    });
    this.railCanvas.addEventListener("pointermove", (event) => {
      if (dragging) this.openStep(stepAt(event), { focus: false });
    });
    this.railCanvas.addEventListener("pointerup", () => {
      dragging = false;
      this.list.focus();
    });
  }

  /** The minimap keeps focus after a click, so ←/→ go on chronologically from the step chosen there. */
  bindMinimap() {
    const stepAt = (event) => {
      const rect = this.canvas.getBoundingClientRect();
      const count = this.trace.steps.length;
      return Math.min(count - 1, Math.max(0, Math.floor(((event.clientX - rect.left) / rect.width) * count)));
    };
    this.canvas.addEventListener("click", (event) => {
      if (!this.trace.steps.length) return;
      this.openStep(stepAt(event), { focus: false });
      this.canvas.focus();
    });
    this.canvas.addEventListener("keydown", (event) => {
      const move = { ArrowLeft: -1, ArrowRight: 1 }[event.key];
      const span = this.selectedSpan();
      if (!move || !span) return;
      event.preventDefault();
      // From a selected message row one step on; from a selected section its first (or last) step.
      const onStep = this.level.items[this.level.selected].kind === "step";
      const next = onStep ? span[0] + move : move > 0 ? span[0] : span[1];
      this.openStep(Math.min(this.trace.steps.length - 1, Math.max(0, next)), { focus: false });
    });
  }

  onKey(event) {
    if (!document.body.contains(this.list)) return this.close();
    // Text inputs, dialogs, the minimap and other controls keep their keys.
    if (document.querySelector("dialog[open]") || event.target.closest("input, textarea, select, button, a, canvas, [contenteditable]")) return;
    const moves = { ArrowDown: 1, ArrowUp: -1 };
    if (event.key in moves) {
      event.preventDefault();
      const count = this.level.items.length;
      this.level.selected = Math.min(count - 1, Math.max(0, this.level.selected + moves[event.key]));
      this.drawRows();
    } else if (event.key === "ArrowRight" || event.key === "Enter") {
      event.preventDefault();
      this.open();
    } else if (event.key === "ArrowLeft" || event.key === "Escape") {
      event.preventDefault();
      this.back();
    }
  }

  close() {
    document.removeEventListener("keydown", this.keyHandler);
  }

  /** Ask for the level's summaries in batches of four ranges, at most two requests at a time. */
  async assess(sections) {
    const missing = sections.filter((section) => !this.summaries.has(rangeKey(section)));
    // Asked for: a level opened again while its batch is in flight does not ask twice.
    for (const section of missing) this.summaries.set(rangeKey(section), null);
    const batches = [];
    for (let start = 0; start < missing.length; start += BATCH) batches.push(missing.slice(start, start + BATCH));
    const worker = async () => {
      for (let batch = batches.shift(); batch; batch = batches.shift()) await this.assessBatch(batch);
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  }

  async assessBatch(batch) {
    const ranges = batch.map((section) => ({ first_step_id: section.first_step_id, last_step_id: section.last_step_id }));
    let found;
    try {
      found = (await post(`/traces/${encodeURIComponent(this.trace.id)}/section-summaries`, { ranges })).summaries;
    } catch (error) {
      // The ranges stay navigable; each says why it has no score.
      found = ranges.map((range) => ({ ...range, score: null, unavailable: true, unavailable_reason: error.message }));
    }
    for (const summary of found) this.summaries.set(rangeKey(summary), summary);
    if (document.body.contains(this.list) && this.level.items.some((item) => batch.includes(item.section))) this.drawRows();
  }
}

function sectionItem(section) {
  return { kind: "section", section };
}

function allSections(sections) {
  return sections.flatMap((section) => [section, ...allSections(section.children)]);
}

function rangeKey(range) {
  return `${range.first_step_id}|${range.last_step_id}`;
}

function cssColor(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** The rail: a tick per step from top to bottom, longer and darker at phase boundaries, the selected span shaded. */
function drawRail(canvas, count, boundaries, range) {
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (!width || !height || !count) return;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const context = canvas.getContext("2d");
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  const slot = height / count;
  if (range) {
    context.fillStyle = cssColor("--minimap-window");
    context.fillRect(0, range[0] * slot, width, Math.max(3, (range[1] - range[0] + 1) * slot));
  }
  const muted = cssColor("--muted");
  const strong = cssColor("--text");
  for (let index = 0; index < count; index += 1) {
    const boundary = boundaries.has(index);
    context.fillStyle = boundary ? strong : muted;
    context.globalAlpha = boundary ? 0.9 : 0.45;
    const y = Math.floor(index * slot + slot / 2);
    if (boundary) context.fillRect(2, y - 1, width - 4, 2);
    else context.fillRect(width / 2 - 4, y, 8, 1);
    context.globalAlpha = 1;
  }
}
