// The section explorer: a trace's steps grouped into tasks and subtasks (GET /traces/{id}/sections), one
// level at a time, with generated titles and 0–1 section scores filled in progressively.
// Keys: ↑/↓ select a section (its span is outlined on the minimap), → or Enter opens it (a section without
// children opens the trace at its first step), ← or Escape goes back to the parent with its selection.

import { get, post } from "./api.js";
import { h, navigate, replace, startScreen } from "./dom.js";
import { drawMinimap } from "./minimap.js";

const BATCH = 4; // the API's most ranges per request
const IN_FLIGHT = 2;

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
    this.stepIndex = new Map(trace.steps.map((step, index) => [step.id, index]));
    this.levels = [{ title: "Whole trace", sections: tasks, selected: 0 }];
    this.summaries = new Map();
    this.render();
    this.keyHandler = (event) => this.onKey(event);
    document.addEventListener("keydown", this.keyHandler);
  }

  get level() {
    return this.levels[this.levels.length - 1];
  }

  render() {
    const tracePath = `/traces/${encodeURIComponent(this.trace.id)}`;
    this.canvas = h("canvas", { class: "minimap", id: "sections-minimap", height: "48", "aria-label": "The selected section's span over the whole trace" });
    this.list = h("div", { class: "section-list", id: "section-list", role: "listbox", tabindex: "0", "aria-label": "Sections" });
    replace(
      this.screen,
      h("header", { class: "screen-head" },
        h("div", {},
          h("a", { href: tracePath, "data-link": "", class: "back" }, "← The trace"),
          h("h1", {}, `Sections of ${this.trace.title || "(untitled)"}`),
          h("nav", { class: "breadcrumbs", id: "breadcrumbs", "aria-label": "Section path" }, this.levels.map((level, depth) =>
            depth === this.levels.length - 1 ? h("span", {}, level.title) : [h("button", { class: "link-button", onclick: () => this.back(depth) }, level.title), " › "])),
        ),
      ),
      h("div", { class: "minimap-bar" }, this.canvas),
      h("p", { class: "hint explorer-hint" }, "↑/↓ select · → or Enter opens · ← or Escape goes back. Scores are the fast model's 0–1 estimate of success at each section's own objective; hover one for its reason."),
      this.list,
    );
    this.drawRows();
    this.assess(this.level.sections);
    this.list.focus();
  }

  drawRows() {
    const { sections, selected } = this.level;
    replace(this.list, sections.length ? sections.map((section, index) => this.row(section, index === selected, index)) : h("p", { class: "empty" }, "No sections: the trace has no steps."));
    const chosen = sections[selected];
    const range = chosen ? [this.stepIndex.get(chosen.first_step_id), this.stepIndex.get(chosen.last_step_id)] : null;
    drawMinimap(this.canvas, this.trace.steps, { fit: false, range, selected: -1 });
    const row = this.list.children[selected];
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  row(section, selected, index) {
    const first = this.stepIndex.get(section.first_step_id) + 1;
    const last = this.stepIndex.get(section.last_step_id) + 1;
    const summary = this.summaries.get(rangeKey(section));
    return h("div", {
      class: `section-row${selected ? " selected" : ""}`, role: "option", "aria-selected": String(selected),
      dataset: { firstStep: String(first), kind: section.kind },
      onclick: () => { this.level.selected = index; this.open(); },
      onmouseenter: () => { this.level.selected = index; this.highlight(); },
    },
      h("span", { class: "section-title" }, section.title),
      summary && summary.title ? h("span", { class: "hint section-generated" }, summary.title) : null,
      h("span", { class: "spacer" }),
      section.activity ? h("span", { class: "chip" }, section.activity) : null,
      section.children.length ? h("span", { class: "hint" }, `${section.children.length} parts`) : null,
      h("span", { class: "hint" }, first === last ? `step ${first}` : `steps ${first}–${last}`),
      scoreBadge(section, summary),
    );
  }

  /** Hover moves the selection without rebuilding the rows. */
  highlight() {
    [...this.list.children].forEach((row, index) => {
      row.classList.toggle("selected", index === this.level.selected);
      row.setAttribute("aria-selected", String(index === this.level.selected));
    });
    const chosen = this.level.sections[this.level.selected];
    drawMinimap(this.canvas, this.trace.steps, { fit: false, range: [this.stepIndex.get(chosen.first_step_id), this.stepIndex.get(chosen.last_step_id)], selected: -1 });
  }

  open() {
    const section = this.level.sections[this.level.selected];
    if (!section) return;
    if (section.children.length) {
      this.levels.push({ title: section.title, sections: section.children, selected: 0 });
      this.render();
    } else {
      this.close();
      navigate(`/traces/${encodeURIComponent(this.trace.id)}?step=${this.stepIndex.get(section.first_step_id) + 1}`);
    }
  }

  back(depth = this.levels.length - 2) {
    if (depth < 0) return;
    this.levels = this.levels.slice(0, depth + 1);
    this.render();
  }

  onKey(event) {
    if (!document.body.contains(this.list)) return this.close();
    // Text inputs, dialogs and other controls keep their keys.
    if (document.querySelector("dialog[open]") || event.target.closest("input, textarea, select, button, a, canvas, [contenteditable]")) return;
    const moves = { ArrowDown: 1, ArrowUp: -1 };
    if (event.key in moves) {
      event.preventDefault();
      const count = this.level.sections.length;
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
    if (document.body.contains(this.list) && this.level.sections.some((section) => batch.includes(section))) this.drawRows();
  }
}

function rangeKey(range) {
  return `${range.first_step_id}|${range.last_step_id}`;
}

function scoreBadge(section, summary) {
  if (!section.graded) return h("span", { class: "section-score context", title: "Context only: no agent response or tool call to assess" }, "context");
  if (!summary) return h("span", { class: "section-score pending" }, "…");
  if (summary.pending) return h("span", { class: "section-score pending", title: "Being assessed" }, "assessing…");
  if (summary.unavailable || summary.score === null || summary.score === undefined) {
    return h("span", { class: "section-score unscored", title: summary.unavailable_reason || summary.reason || "No evidence to assess" }, "Unscored");
  }
  return h("span", { class: "section-score", title: `${summary.objective}\n${summary.reason}` }, summary.score.toFixed(2));
}
