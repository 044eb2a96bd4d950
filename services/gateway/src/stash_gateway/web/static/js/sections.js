// The section explorer: a trace's steps grouped into tasks and subtasks (GET /traces/{id}/sections), one
// level of cards at a time, with generated titles and 0–1 section scores filled in progressively.
// Entering a leaf section shows the complete chronological trace as collapsed message rows, scrolled to the
// section's first step, with a compact divider at each phase change; the breadcrumb follows scrolling (the
// section of the top row, or of the step chosen last until the reader scrolls), and Back to sections, ← or
// Escape return to the cards of that section with it selected. Keys on the cards: ↑/↓ select a card (its
// span is outlined on the minimap), → or Enter opens it. Keys on the trace: ↑/↓ move step by step, → or
// Enter opens the step in the trace view. The left rail holds every step as a destination; the focused
// minimap moves step by step with ←/→. A single-task trace lands on that task's parts (or its steps).

import { get, post } from "./api.js";
import { h, navigate, replace, startScreen } from "./dom.js";
import { loadCompletionRuns } from "./completion.js";
import { drawMinimap, minimapLegend, stepCredit } from "./minimap.js";
import { VirtualList } from "./virtual.js";

const BATCH = 4; // the API's most ranges per request
const IN_FLIGHT = 2;
const ROLE_LABELS = { system: "System", user: "User", assistant: "Agent", tool: "Tool result" };
const ROW_PX = 28;
const SCORE_MEANING = "Estimated success at this section's own objective, 0–1 (the fast model's estimate; not action credit)";

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
    this.paths = leafPaths(tasks, this.stepIndex, trace.steps.length);
    // Every section start is a phase boundary: a stronger tick on the rail, a divider in the trace.
    this.boundaries = new Set(allSections(tasks).map((section) => this.stepIndex.get(section.first_step_id)));
    this.summaries = new Map();
    this.completion = [];
    this.mount();
    this.levels = this.singleLeafTask() ? [this.traceLevel(0)] : [this.overview()];
    this.render();
    this.loadCompletion();
    this.keyHandler = (event) => this.onKey(event);
    document.addEventListener("keydown", this.keyHandler);
  }

  /** The whole-trace cards; a single task is only a breadcrumb above its parts. */
  overview() {
    const [only] = this.tasks;
    if (this.tasks.length !== 1) return { kind: "cards", title: "Whole trace", items: this.tasks, selected: 0 };
    return { kind: "cards", title: only.title, items: only.children, selected: 0, section: only };
  }

  singleLeafTask() {
    return this.tasks.length === 1 && !this.tasks[0].children.length;
  }

  /** The complete trace, `index` selected; the breadcrumb follows the selection until the reader scrolls. */
  traceLevel(index) {
    return { kind: "trace", selected: index, followViewport: false };
  }

  /** The cards that lead to the leaf section holding step `index`, each with the section on the way selected. */
  cardsTo(index) {
    if (this.singleLeafTask()) return [];
    const levels = [this.overview()];
    for (const section of this.paths[index] || []) {
      const level = levels[levels.length - 1];
      const position = level.items.indexOf(section);
      if (position < 0) continue; // a single task is the overview itself, not one of its cards
      level.selected = position;
      if (section.children.length) levels.push({ kind: "cards", title: section.title, items: section.children, selected: 0, section });
    }
    return levels;
  }

  async loadCompletion() {
    const completion = await loadCompletionRuns(this.trace.id, this.stepIndex, () => document.body.contains(this.list));
    this.completion = completion.runs;
    this.canvas.dataset.completionRuns = String(completion.runs.length);
    if (!document.body.contains(this.list)) return;
    const legend = minimapLegend({ completion });
    this.legend.replaceWith(legend);
    this.legend = legend;
    this.drawMaps();
  }

  get level() {
    return this.levels[this.levels.length - 1];
  }

  /** What stays mounted across levels: the header, the minimap and the rail (kept during a drag). */
  mount() {
    const tracePath = `/traces/${encodeURIComponent(this.trace.id)}`;
    this.canvas = h("canvas", { class: "minimap", id: "sections-minimap", height: "48", tabindex: "0", "aria-label": "The whole trace: the selected section's span is outlined; click a step to go there, ←/→ move step by step" });
    this.railCanvas = h("canvas", { class: "section-rail", id: "section-rail", "aria-label": "Every step of the trace; phase boundaries are the stronger ticks" });
    this.crumbs = h("nav", { class: "breadcrumbs", id: "breadcrumbs", "aria-label": "Section path" });
    this.list = h("div", { class: "section-list", id: "section-list", role: "listbox", tabindex: "0", "aria-label": "Sections" });
    this.tooltip = h("div", { class: "score-tooltip", id: "score-tooltip", role: "tooltip", hidden: true });
    this.notice = h("p", { class: "notice explorer-notice", id: "sections-unscored", role: "status", hidden: true });
    const graded = this.trace.steps.some((step) => stepCredit(step) !== null);
    this.legend = minimapLegend({ completion: { runs: [], reason: null, pending: true } });
    replace(
      this.screen,
      h("div", { class: "sections-screen" },
        h("header", { class: "screen-head" },
          h("div", {},
            h("a", { href: tracePath, "data-link": "", class: "back" }, "← The trace"),
            h("h1", {}, `Sections of ${this.trace.title || "(untitled)"}`),
            this.crumbs,
          ),
        ),
        // The credit graph is left out when no action has a grade.
        h("div", { class: "minimap-bar", hidden: !graded }, this.canvas),
        graded ? this.legend : null,
        h("p", { class: "hint explorer-hint" }, "↑/↓ select · → or Enter opens · ← or Escape goes back · the rail and the minimap go to any step. Scores are the fast model's 0–1 estimate of success at each section's own objective; hover one for its objective and reason."),
        this.notice,
        h("div", { class: "explorer-body" },
          h("div", { class: "rail-column" },
            h("button", { class: "rail-overview", id: "rail-overview", title: "The whole-trace overview", "aria-label": "The whole-trace overview", onclick: () => this.toOverview() }),
            this.railCanvas,
          ),
          this.list,
        ),
      ),
      this.tooltip,
    );
    this.bindRail();
    this.bindMinimap();
    new ResizeObserver(() => this.drawMaps()).observe(this.railCanvas);
  }

  render({ focus = true } = {}) {
    this.tooltip.hidden = true;
    if (this.level.kind === "trace") this.drawTrace();
    else this.drawCards();
    this.drawCrumbs();
    if (focus) this.list.focus();
  }

  /** Ancestors are buttons back to their cards; the current section is plain text. */
  drawCrumbs() {
    const { cards, current } = this.crumbPath();
    const back = this.level.kind === "trace" && cards.length
      ? h("button", { class: "link-button back-to-sections", id: "back-to-sections", onclick: () => this.backToCards() }, "Back to sections")
      : null;
    replace(this.crumbs,
      cards.map((level, depth) => [h("button", { class: "link-button", onclick: () => this.toCards(depth) }, level.title), " › "]),
      h("span", { class: "current-section" }, current),
      back);
  }

  /** The card levels above what is shown, and the title of what is shown. */
  crumbPath() {
    if (this.level.kind === "cards") return { cards: this.levels.slice(0, -1), current: this.level.title };
    const shown = this.shownStep();
    const path = this.paths[shown] || [];
    return { cards: this.cardsTo(shown), current: path.length ? path[path.length - 1].title : "" };
  }

  /** The step the trace level is about: the top row once the reader scrolled, else the one chosen last. */
  shownStep() {
    const level = this.level;
    return level.followViewport && this.rows ? this.rows.visibleRange()[0] : level.selected;
  }

  toCards(depth) {
    this.levels = this.level.kind === "trace" ? this.cardsTo(this.shownStep()).slice(0, depth + 1) : this.levels.slice(0, depth + 1);
    this.render();
  }

  /** From the trace to the cards of the section being read, that section selected. */
  backToCards() {
    const cards = this.cardsTo(this.shownStep());
    if (!cards.length) return; // a single-task trace without parts has no cards to go back to
    this.levels = cards;
    this.render();
  }

  drawCards() {
    this.rows = null;
    this.list.classList.remove("trace-level");
    const { items, selected } = this.level;
    replace(this.list, items.map((section, index) => this.cardRow(section, index === selected, index)));
    this.drawMaps();
    const row = this.list.children[selected];
    if (row) row.scrollIntoView({ block: "nearest" });
    this.assess(items);
  }

  cardRow(section, selected, index) {
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
      this.scoreBadge(section, summary),
    );
  }

  /** Every step in recorded order, a divider where a section starts, the level's step at the top. */
  drawTrace() {
    this.list.classList.add("trace-level");
    const scroller = h("div", { class: "section-trace", id: "section-trace" });
    replace(this.list, scroller);
    const rows = new VirtualList(scroller, this.trace.steps.length, (index) => this.traceRow(index), ROW_PX);
    rows.onrange = () => rows === this.rows && this.followScroll(); // a left trace's last frame changes nothing
    this.rows = rows;
    // Only the reader's own scrolling hands the breadcrumb to the viewport; moves made here keep the selection.
    for (const type of ["wheel", "touchmove", "pointerdown"]) scroller.addEventListener(type, () => (this.level.followViewport = true), { passive: true });
    this.rows.scrollTo(this.level.selected, 0);
    this.drawMaps();
  }

  traceRow(index) {
    const step = this.trace.steps[index];
    const call = step.tool_name ? `${step.tool_name} ${JSON.stringify(step.tool_input ?? {})}` : "";
    const selected = index === this.level.selected;
    const message = h("div", {
      class: `section-row message-row${selected ? " selected" : ""}`, role: "option", "aria-selected": String(selected),
      dataset: { step: String(index + 1) },
      onclick: () => { this.selectStep(index); this.open(); },
    },
      h("span", { class: "message-number" }, String(index + 1)),
      h("span", { class: "message-role" }, ROLE_LABELS[step.role] || step.role),
      step.tool_name ? h("code", { class: "tool-name" }, step.tool_name) : null,
      h("span", { class: "message-excerpt" }, (step.content || call).replace(/\s+/g, " ").slice(0, 300)),
    );
    return h("div", { class: "trace-row" }, this.boundaries.has(index) ? this.divider(index) : null, message);
  }

  /** A compact divider naming the section that starts at step `index` (with its task, for a subtask). */
  divider(index) {
    const path = this.paths[index] || [];
    return h("div", { class: "phase-divider", role: "separator", dataset: { step: String(index + 1) } }, path.map((section) => section.title).join(" › "));
  }

  /** The breadcrumb and the maps follow the rows in view (or the selection, until the reader scrolls). */
  followScroll() {
    const key = (this.paths[this.shownStep()] || []).map((section) => section.first_step_id).join("|");
    if (key !== this.shownKey) {
      this.shownKey = key;
      this.drawCrumbs();
    }
    this.drawMaps();
  }

  selectStep(index) {
    const previous = this.rows.row(this.level.selected);
    if (previous) previous.querySelector(".message-row").classList.remove("selected");
    this.level.selected = index;
    this.level.followViewport = false;
    this.rows.reveal(index);
    const row = this.rows.row(index);
    if (row) row.querySelector(".message-row").classList.add("selected");
    this.followScroll();
  }

  /** The 0–1 score; hovering or focusing it shows what it is, its objective and reason without opening the section. */
  scoreBadge(section, summary) {
    if (!section.graded) return this.explained(h("span", { class: "section-score context" }, "context"), "Context only: no agent response or tool call to assess");
    if (!summary) return h("span", { class: "section-score pending", title: SCORE_MEANING }, "…");
    if (summary.pending) return this.explained(h("span", { class: "section-score pending" }, "assessing…"), `${SCORE_MEANING}: being assessed`);
    if (summary.unavailable || summary.score === null || summary.score === undefined) {
      return this.explained(h("span", { class: "section-score unscored" }, "Unscored"), `Unscored: ${summary.unavailable_reason || summary.reason || "no evidence to assess"}`);
    }
    const badge = h("span", { class: "section-score", "aria-label": `success estimate ${summary.score.toFixed(2)} of 1` }, summary.score.toFixed(2));
    return this.explained(badge, [h("strong", {}, SCORE_MEANING), h("br"), h("strong", {}, "Objective: "), summary.objective || "—", h("br"), h("strong", {}, "Why: "), summary.reason || "—"]);
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

  /** Hover moves the card selection without rebuilding the rows. */
  highlight() {
    [...this.list.children].forEach((row, index) => {
      row.classList.toggle("selected", index === this.level.selected);
      row.setAttribute("aria-selected", String(index === this.level.selected));
    });
    this.drawMaps();
  }

  /** The steps to outline as [first, last] indexes: the selected card's, or the leaf section shown. */
  selectedSpan() {
    if (this.level.kind === "cards") {
      const section = this.level.items[this.level.selected];
      return section ? [this.stepIndex.get(section.first_step_id), this.stepIndex.get(section.last_step_id)] : null;
    }
    const path = this.paths[this.shownStep()] || [];
    const leaf = path[path.length - 1];
    return leaf ? [this.stepIndex.get(leaf.first_step_id), this.stepIndex.get(leaf.last_step_id)] : null;
  }

  drawMaps() {
    const range = this.selectedSpan();
    const selected = this.level.kind === "trace" ? this.level.selected : -1;
    drawMinimap(this.canvas, this.trace.steps, { fit: false, range, selected, completion: this.completion });
    drawRail(this.railCanvas, this.trace.steps.length, this.boundaries, range);
  }

  open() {
    if (this.level.kind === "trace") {
      this.close();
      navigate(`/traces/${encodeURIComponent(this.trace.id)}?step=${this.level.selected + 1}`);
      return;
    }
    const section = this.level.items[this.level.selected];
    if (!section) return;
    if (section.children.length) this.levels.push({ kind: "cards", title: section.title, items: section.children, selected: 0, section });
    else this.levels.push(this.traceLevel(this.stepIndex.get(section.first_step_id)));
    this.render();
  }

  back() {
    if (this.level.kind === "trace") this.backToCards();
    else if (this.levels.length > 1) {
      this.levels.pop();
      this.render();
    }
  }

  toOverview() {
    this.levels = this.singleLeafTask() ? [this.traceLevel(0)] : [this.overview()];
    this.render();
    this.list.scrollTop = 0;
  }

  /** Open the recorded step `index` from anywhere: the trace at that step, the cards of its sections below. */
  openStep(index, { focus = true } = {}) {
    this.levels = [...this.cardsTo(index), this.traceLevel(index)];
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
      // On the trace one step on; from a selected card its first (or last) step.
      const next = this.level.kind === "trace" ? this.level.selected + move : move > 0 ? span[0] : span[1];
      this.openStep(Math.min(this.trace.steps.length - 1, Math.max(0, next)), { focus: false });
    });
  }

  onKey(event) {
    if (!document.body.contains(this.list)) return this.close();
    // Text inputs, dialogs, the minimap and other controls keep their keys.
    if (document.querySelector("dialog[open]") || event.target.closest("input, textarea, select, button, a, canvas, [contenteditable]")) return;
    const move = { ArrowDown: 1, ArrowUp: -1 }[event.key];
    if (move) {
      event.preventDefault();
      this.move(move);
    } else if (event.key === "ArrowRight" || event.key === "Enter") {
      event.preventDefault();
      this.open();
    } else if (event.key === "ArrowLeft" || event.key === "Escape") {
      event.preventDefault();
      this.back();
    }
  }

  move(by) {
    if (this.level.kind === "trace") {
      this.selectStep(Math.min(this.trace.steps.length - 1, Math.max(0, this.level.selected + by)));
      return;
    }
    this.level.selected = Math.min(this.level.items.length - 1, Math.max(0, this.level.selected + by));
    this.drawCards();
  }

  close() {
    document.removeEventListener("keydown", this.keyHandler);
  }

  /** Ask for the cards' summaries in batches of four ranges, at most two requests at a time. */
  async assess(sections) {
    const missing = sections.filter((section) => section.graded && !this.summaries.has(rangeKey(section)));
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
    this.explainUnscored(found);
    if (document.body.contains(this.list) && this.level.kind === "cards" && this.level.items.some((section) => batch.includes(section))) this.drawCards();
  }

  /** Say once, above the cards, why scores are missing (no fast model configured, say), not only in tooltips. */
  explainUnscored(summaries) {
    const reason = summaries.map((summary) => summary.unavailable && summary.unavailable_reason).find(Boolean);
    if (!reason || !this.notice.hidden) return;
    this.notice.textContent = `Section scores are unavailable: ${reason}.`;
    this.notice.hidden = false;
  }
}

/** Step index → the sections holding it, from its task down to its leaf. */
function leafPaths(tasks, stepIndex, count) {
  const paths = new Array(count);
  const walk = (section, above) => {
    const path = [...above, section];
    if (section.children.length) section.children.forEach((child) => walk(child, path));
    else for (const id of section.step_ids) paths[stepIndex.get(id)] = path;
  };
  tasks.forEach((task) => walk(task, []));
  return paths;
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
