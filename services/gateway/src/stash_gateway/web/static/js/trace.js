// The trace view ("Trace messages"): every step in recorded order in a virtualised list, the minimap
// of step credit, task score cards, process patterns on their ranges, spans, and annotating.

import { annotationItem, openAnnotationDialog } from "./annotate.js";
import { get, post } from "./api.js";
import { copyText, disableWith, guardWrite, h, localTime, replace, reviewerReason, signed, startScreen } from "./dom.js";
import { messageNodes, codeSpan } from "./highlight.js";
import { completionAt, completionText, loadCompletionRuns } from "./completion.js";
import { automaticReward, drawMinimap, importedScore, minimapLegend, stepCredit } from "./minimap.js";
import { SHARED, creditControl, creditsOf, hasRelease, scoringModels, sourceName } from "./credit.js";
import { spanTimeline } from "./spans.js";
import { VirtualList } from "./virtual.js";

const PREVIEW_CHARS = 700;
const PREVIEW_LINES = 10;
const QUOTE_CONTEXT = 40;
const ROLE_LABELS = { system: "System", user: "User", assistant: "Agent", tool: "Tool result" };
const POLL_MS = 2000;
const POLLS_MAX = 90;
// The learned-credit source chosen last (a model id, SHARED, or "" for the automatic scores): kept while moving
// between traces; null until one is chosen, when the shared evaluator is shown if a release exists.
let chosenModelId = null;

export async function renderTrace(screen, session, traceId) {
  const current = startScreen();
  const [trace, ownModels] = await Promise.all([get(`/traces/${encodeURIComponent(traceId)}`), scoringModels()]);
  const ownerName = trace.reviewing ? await sharingOwnerName(trace.source_owner_id) : null;
  if (!current()) return;
  // Only the caller's own models, and none on a trace shared for review: the owner's scores stay the owner's.
  const view = new TraceView(screen, session, trace, trace.reviewing ? [] : ownModels, ownerName);
  // `?step=N` (the section explorer's links) opens the trace at step N.
  const step = Number(new URLSearchParams(location.search).get("step"));
  if (step) view.select(step - 1, true);
  // bench/ui_load.py reads this mark: the first rows are in the DOM (painted on the next frame).
  performance.mark("stash:trace-rendered");
}

// The name of the owner who shares a trace with the caller, from the grants the caller received.
async function sharingOwnerName(ownerId) {
  const grant = (await get("/shared/owners")).find((received) => received.owner_id === ownerId);
  return grant ? grant.owner_name : null;
}

class TraceView {
  constructor(screen, session, trace, models, ownerName = null) {
    this.screen = screen;
    this.session = session;
    this.trace = trace;
    this.ownerName = ownerName;
    const released = hasRelease(trace) && !trace.reviewing;
    const valid = chosenModelId === "" || (chosenModelId === SHARED && released) || models.some((model) => model.id === chosenModelId);
    const modelId = valid ? chosenModelId : released ? SHARED : "";
    this.learned = { models, modelId, credits: new Map(), watching: null };
    this.expanded = new Set();
    this.openBreakdowns = new Set();
    this.selected = -1;
    this.fit = false;
    this.polls = 0;
    this.completion = { runs: [], reason: null, pending: true };
    this.index();
    this.render();
    this.watchEvaluation();
    this.loadCompletion();
  }

  /** The completion curve, drawn once its estimate is in (it stays for this view's redraws), or why there is none. */
  async loadCompletion() {
    const completion = await loadCompletionRuns(this.trace.id, this.stepIndex, () => document.body.contains(this.scroller));
    if (!document.body.contains(this.scroller)) return;
    this.completion = completion;
    this.canvas.dataset.completionRuns = String(completion.runs.length);
    this.legend.replaceWith(this.minimapLegend());
    this.drawMap(this.list.visibleRange());
  }

  minimapLegend() {
    this.legend = minimapLegend({ learnedName: sourceName(this), completion: this.completion });
    return this.legend;
  }

  /** While labels and scores are pending, look again now and then; redraw in place when they change. */
  watchEvaluation() {
    const status = (this.trace.evaluation || {}).status;
    if ((status && status !== "queued" && status !== "running") || this.polls >= POLLS_MAX) return;
    this.polls += 1;
    setTimeout(async () => {
      if (!document.body.contains(this.scroller)) return;
      const fresh = await get(`/traces/${encodeURIComponent(this.trace.id)}`);
      // A redraw replaces the rows, and with them text the reader is selecting to annotate: wait for it.
      if (JSON.stringify(fresh.evaluation) !== JSON.stringify(this.trace.evaluation) && !this.selecting()) this.redraw(fresh);
      this.watchEvaluation();
    }, POLL_MS);
  }

  /** Whether text inside the steps is selected (a quote in the making). */
  selecting() {
    const selection = getSelection();
    return Boolean(selection && !selection.isCollapsed && this.scroller.contains(selection.anchorNode));
  }

  redraw(trace) {
    const scroll = this.scroller.scrollTop;
    this.trace = trace;
    this.index();
    this.render();
    this.scroller.scrollTop = scroll;
    this.list.update();
  }

  /** Lookups by step: annotations, the task cards that open before a step, the patterns over it. */
  index() {
    const { steps, annotations, process_patterns: patterns } = this.trace;
    const tasks = this.trace.rule_step_scores ?? this.trace.step_scores;  // imported task scores go in the header
    this.stepIndex = new Map(steps.map((step, index) => [step.id, index]));
    this.byStep = new Map();
    this.traceNotes = [];
    for (const annotation of annotations) {
      if (!annotation.step_id) this.traceNotes.push(annotation);
      else (this.byStep.get(annotation.step_id) || this.byStep.set(annotation.step_id, []).get(annotation.step_id)).push(annotation);
    }
    this.cardsAt = new Map();
    for (const task of tasks || []) {
      const first = this.stepIndex.get(task.first_step_id);
      if (first !== undefined) (this.cardsAt.get(first) || this.cardsAt.set(first, []).get(first)).push(task);
    }
    this.patterns = patterns || [];
    this.learned.credits = creditsOf(this.trace, this.stepIndex, this.learned.modelId);
  }

  /** Whether any displayed action has a grade: without one the credit graph is left out. */
  hasGrades() {
    if (this.learned.modelId) return this.learned.credits.size > 0;
    return this.trace.steps.some((step) => stepCredit(step) !== null);
  }

  /** Show a model's learned action credit instead of the automatic step scores ("" for those). */
  chooseModel(modelId) {
    chosenModelId = modelId;
    this.learned.modelId = modelId;
    this.redraw(this.trace);
  }

  render() {
    const trace = this.trace;
    if (this.keyHandler) document.removeEventListener("keydown", this.keyHandler);
    if (this.themeListener) document.removeEventListener("stash-theme", this.themeListener);
    this.scroller = h("div", { class: "steps-scroller", id: "steps", tabindex: "0", "aria-label": "Trace steps" });
    const graded = this.hasGrades();
    this.hover = h("div", { class: "minimap-hover", id: "minimap-hover", hidden: !graded }, "\u00a0");
    this.canvas = h("canvas", { class: "minimap", id: "minimap", height: "72", tabindex: "0", dataset: { completionRuns: String(this.completion.runs.length) }, "aria-label": "Step credit (left axis: positive up, negative down) and estimated completion (right axis, 0–100 %); click a step to go there, ←/→ move step by step" });
    const fitToggle = h("div", { class: "segmented", role: "group", "aria-label": "Minimap scale" },
      h("button", { id: "minimap-fixed", "aria-pressed": String(!this.fit), onclick: () => this.setFit(false) }, "±1"),
      h("button", { id: "minimap-fit", "aria-pressed": String(this.fit), onclick: () => this.setFit(true) }, "Fit"),
    );
    this.fitToggle = fitToggle;
    const legend = this.minimapLegend(); // made either way: a completion estimate arriving later replaces it
    replace(
      this.screen,
      h("div", { class: "trace-screen" },
        h("header", { class: "screen-head trace-head" },
          h("div", {},
            trace.reviewing
              ? h("a", { href: "/shared", "data-link": "", class: "back", id: "back-to-list" }, "← Shared with me")
              : h("a", { href: "/traces", "data-link": "", class: "back", id: "back-to-list" }, "← Traces"),
            " · ",
            h("a", { href: `/traces/${encodeURIComponent(trace.id)}/sections`, "data-link": "", class: "back", id: "open-sections" }, "Explore by sections"),
            h("h1", { id: "trace-title" }, trace.title || "(untitled)"),
            this.metaLine(),
            this.trainedLine(),
            trace.reviewing ? h("p", { class: "notice", id: "reviewing-notice" }, `Shared with you for review by ${this.ownerName || "its owner"}: you can read, comment, rate and flag label errors; deleting, relabeling, scoring and training stay with the owner.`) : null,
          ),
          h("div", { class: "actions" }, creditControl(this), this.rescoreControl()),
        ),
        this.patternList(),
        this.traceAnnotations(),
        trace.spans.length ? spanTimeline(trace.spans) : null,
        h("div", { class: "minimap-bar", id: "minimap-bar", hidden: !graded }, this.canvas, fitToggle),
        graded ? legend : null,
        this.hover,
        this.scroller,
      ),
    );
    this.list = new VirtualList(this.scroller, trace.steps.length, (index) => this.stepRow(index));
    this.list.onrange = (range) => this.drawMap(range);
    this.bindMinimap();
    this.bindKeys();
    this.bindSelection();
    this.themeListener = () => this.drawMap(this.list.visibleRange());
    document.addEventListener("stash-theme", this.themeListener);
    new ResizeObserver(() => this.drawMap(this.list.visibleRange())).observe(this.canvas);
    // A taller window shows more rows: mount them, or the list ends short of the window's bottom.
    new ResizeObserver(() => this.list.schedule()).observe(this.scroller);
  }

  /** The header's line: source, size, import time, the automatic trace score and outcome, the annotation counts. */
  // The caller's own reward models trained on this trace (the gateway never returns another user's).
  trainedLine() {
    const models = this.trace.trained_models || [];
    if (!models.length) return null;
    const links = models.flatMap((model, index) => [
      index ? ", " : null,
      h("a", { href: `/models/${encodeURIComponent(model.id)}`, "data-link": "" }, model.name),
    ]);
    return h("p", { class: "meta", id: "trained-into" }, h("span", {}, "Trained into: ", ...links));
  }

  metaLine() {
    const trace = this.trace;
    const evaluation = trace.evaluation || {};
    const parts = [
      h("span", {}, trace.source_name || trace.source_id),
      h("span", {}, `${trace.step_count} steps`),
      h("span", {}, `imported ${localTime(trace.created_at)}`),
      h("span", { id: "trace-score", title: "The mean of the task scores (−1…+1), from the automatic labels" }, `automatic trace score ${signed(evaluation.score)}`),
      importedTaskScores(trace),
      evaluation.outcome ? h("span", { class: `outcome ${evaluation.outcome}`, id: "trace-outcome", title: "Outcome, read from the user's reactions to the answers" }, evaluation.outcome.replaceAll("_", " ")) : h("span", {}, "not scored yet"),
      h("span", { id: "trace-counts", title: "Ratings (flagged label errors left out) and comments" }, `+${trace.positive_count} / −${trace.negative_count} ratings · ${trace.comment_count} comment${trace.comment_count === 1 ? "" : "s"}`),
    ];
    this.meta = h("p", { class: "meta", id: "trace-meta" }, parts);
    return this.meta;
  }

  /** The rescore icon: its state shows activity; a failure's details open on demand. */
  rescoreControl() {
    const evaluation = this.trace.evaluation || {};
    const failed = evaluation.status === "failed";
    const busy = evaluation.status === "queued" || evaluation.status === "running";
    const details = h("div", { class: "popover", id: "rescore-details", hidden: true }, failed ? `The last labeling failed: ${evaluation.error || "no reason recorded"}` : `Labels and scores of revision ${evaluation.shown_revision ?? "—"} (${evaluation.labeler || "—"}).`);
    const guard = (element) => (this.trace.reviewing ? disableWith(element, reviewerReason("relabel it")) : guardWrite(element, this.session));
    const button = guard(
      h("button", {
        class: `icon-button rescore${failed ? " failed" : ""}${busy ? " busy" : ""}`,
        id: "rescore",
        title: "Rerun automatic labels and scores",
        "aria-label": "Rerun automatic labels and scores",
        onclick: async () => {
          button.classList.add("busy");
          try {
            const queued = await post(`/traces/${encodeURIComponent(this.trace.id)}/relabel`);
            this.trace.evaluation = { ...(this.trace.evaluation || {}), status: queued.status };
            this.polls = 0;
            this.watchEvaluation();
          } catch (error) {
            details.textContent = error.message;
            details.hidden = false;
          }
        },
      }, "↻"),
    );
    const info = h("button", { class: "icon-button", id: "rescore-info", title: failed ? "Why labeling failed" : "About these scores", "aria-expanded": "false", onclick: () => {
      details.hidden = !details.hidden;
      info.setAttribute("aria-expanded", String(!details.hidden));
    } }, failed ? "!" : "i");
    return h("div", { class: "rescore-wrap" }, button, info, details);
  }

  patternList() {
    if (!this.patterns.length) return null;
    return h("section", { class: "patterns", id: "patterns", "aria-label": "Process patterns" },
      this.patterns.map((pattern) =>
        h("button", { class: `pattern-card severity-${pattern.severity}`, onclick: () => this.select(pattern.first_step_index, true) },
          h("strong", {}, pattern.pattern), h("span", { class: "hint" }, ` ${pattern.taxonomy} · steps ${pattern.first_step_index + 1}–${pattern.last_step_index + 1}`),
          h("span", { class: "suggestion" }, pattern.suggestion),
        ),
      ),
    );
  }

  traceAnnotations() {
    const list = h("ul", { class: "annotations", id: "trace-annotations" }, this.traceNotes.map((annotation) => this.item(annotation, null)));
    const add = guardWrite(h("button", { id: "comment-trace", onclick: () => openAnnotationDialog({ session: this.session, traceId: this.trace.id, step: null, onSaved: (saved) => this.changed(saved, null, null) }) }, "Comment on the whole trace"), this.session);
    this.traceNotesBox = h("section", { class: "trace-notes" }, h("div", { class: "row" }, h("h2", {}, "Trace comments"), add), list);
    return this.traceNotesBox;
  }

  item(annotation, step) {
    return annotationItem(annotation, { session: this.session, traceId: this.trace.id, step, reviewing: this.trace.reviewing, onChange: (saved) => this.changed(saved, step, annotation) });
  }

  /** After a create, edit, flag or delete: update the lookups and redraw only what shows it. */
  changed(saved, step, previous) {
    const all = this.trace.annotations.filter((item) => item !== previous && (!saved || item.id !== saved.id));
    if (saved) all.push(saved);
    this.trace.annotations = all;
    countAnnotations(this.trace);
    this.meta.replaceWith(this.metaLine());
    this.index();
    if (step) this.list.refresh(this.stepIndex.get(step.id));
    else this.traceNotesBox.replaceWith(this.traceAnnotations());
  }

  stepRow(index) {
    const step = this.trace.steps[index];
    const inPattern = this.patterns.filter((pattern) => pattern.first_step_index <= index && index <= pattern.last_step_index);
    const credit = this.learned.credits.get(index);
    const creditClass = credit === undefined ? "" : credit > 0 ? " credit-positive" : credit < 0 ? " credit-negative" : "";
    const row = h("article", { class: `step role-${step.role}${inPattern.length ? " in-pattern" : ""}${creditClass}${index === this.selected ? " selected" : ""}`, dataset: { stepId: step.id }, id: `step-${index + 1}` });
    for (const task of this.cardsAt.get(index) || []) row.append(this.taskCard(task));
    for (const pattern of this.patterns.filter((item) => item.first_step_index === index)) {
      row.append(h("div", { class: "pattern-banner" }, h("strong", {}, pattern.pattern), ` steps ${pattern.first_step_index + 1}–${pattern.last_step_index + 1}: `, pattern.suggestion));
    }
    row.append(
      h("div", { class: "step-grid" },
        h("div", { class: "gutter", "aria-hidden": "true" }, String(index + 1)),
        h("div", { class: "step-main" },
          this.heading(step, index),
          this.openBreakdowns.has(index) ? this.breakdown(step) : null,
          this.body(step, index),
          this.stepAnnotations(step),
        ),
      ),
    );
    return row;
  }

  heading(step, index) {
    const reward = automaticReward(step);
    const time = step.metadata.timestamp;
    const score = reward ? this.creditChip(reward, index) : null;
    const imported = importedScore(step);
    const importedChip = imported === null ? null : h("span", { class: "score-chip imported", title: "Score imported with the trace (metadata.reward); the automatic rule score is beside it" },
      h("span", { class: "chip-label" }, "imported"), ` ${signed(imported)}`);
    const comment = guardWrite(h("button", { class: "link-button", onclick: () => this.annotateStep(step, null) }, "Comment"), this.session);
    return h("div", { class: "step-head" },
      h("span", { class: "role" }, ROLE_LABELS[step.role] || step.role),
      step.tool_name ? h("code", { class: "tool-name" }, step.tool_name) : null,
      time ? h("time", { datetime: time }, localTime(time)) : null,
      h("span", { class: "spacer" }),
      this.creditBadge(index),
      importedChip,
      score,
      comment,
    );
  }

  /** The step's automatic credit, saying what it is; it opens the breakdown of how it was reached. */
  creditChip(reward, index) {
    const expected = reward.expected_credit !== null && reward.expected_credit !== undefined;
    const what = expected
      ? "Automatic credit (−1…+1): the expected credit of this step's label probabilities"
      : "Automatic step score (−1…+1): its labels' points plus credit passed back from the answer";
    const value = signed(stepCredit({ metadata: { reward } }));
    return h("button", { class: "score-chip", "aria-expanded": String(this.openBreakdowns.has(index)), title: `${what}. Click for how it was reached.`, "aria-label": `${what}: ${value}`, onclick: () => this.toggleBreakdown(index) },
      h("span", { class: "chip-label" }, expected ? "credit" : "score"), ` ${value}`);
  }

  creditBadge(index) {
    const credit = this.learned.credits.get(index);
    if (credit === undefined) return null;
    const title = `Learned action credit of ${sourceName(this) || "the model"}: how much it prefers this action over its training reference (0); not a probability`;
    return h("span", { class: `credit-badge ${credit > 0 ? "up" : credit < 0 ? "down" : ""}`, title, "aria-label": `${title}: ${signed(credit)}` }, `learned credit ${signed(credit)}`);
  }

  breakdown(step) {
    const reward = automaticReward(step);
    const lines = [
      ...(reward.terms || []).map((term) => [term.reason, signed(term.points)]),
      ["points", signed(reward.points)],
      ["passed back from the answer", signed(reward.passed_back)],
      ["score (−1..+1)", signed(reward.score)],
      reward.expected_credit !== null && reward.expected_credit !== undefined ? ["expected credit (shown)", signed(reward.expected_credit)] : null,
      reward.credit !== null && reward.credit !== undefined ? ["credit band", String(reward.credit)] : null,
      ...importedLines(step),
    ].filter(Boolean);
    return h("dl", { class: "breakdown" }, lines.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
  }

  toggleBreakdown(index) {
    if (this.openBreakdowns.has(index)) this.openBreakdowns.delete(index);
    else this.openBreakdowns.add(index);
    this.list.refresh(index);
  }

  body(step, index) {
    const parts = [];
    if (step.tool_input !== null && step.tool_input !== undefined) {
      // Shown like an output: open, folded only when long (its summary row says so and opens it).
      const json = JSON.stringify(step.tool_input, null, 2);
      const long = isLong(json);
      const label = `Input${step.tool_name ? ` to ${step.tool_name}` : ""}${long ? ` · ${length(json)}, folded: click to show` : ""}`;
      parts.push(this.disclosure(label, codeSpan(json), json, "Copy input", !long));
    }
    if (step.role === "tool") {
      parts.push(this.disclosure(`Output${step.tool_name ? ` of ${step.tool_name}` : ""}`, this.content(step, index), step.content, "Copy output", true));
    } else if (step.content) {
      parts.push(this.content(step, index));
    }
    return parts;
  }

  disclosure(label, inner, text, copyLabel, open = false) {
    const copy = h("button", { class: "link-button copy", onclick: (event) => { event.preventDefault(); copyText(copy, text); } }, copyLabel);
    return h("details", { class: "disclosure", open }, h("summary", {}, h("span", {}, label), copy), h("div", { class: "disclosure-body" }, inner));
  }

  /** The message text: a compact preview until Read full message; Show less (sticky) or Escape folds it. */
  content(step, index) {
    const text = step.content;
    const long = isLong(text);
    const expanded = this.expanded.has(index);
    const box = h("div", { class: `content${long && !expanded ? " collapsed" : ""}`, dataset: { stepId: step.id } }, messageNodes(text));
    if (!long) return box;
    const toggle = expanded
      ? h("button", { class: "show-less", onclick: () => this.collapse(index) }, "Show less")
      : h("button", { class: "read-more", onclick: () => this.expand(index) }, "Read full message");
    return h("div", { class: `message${expanded ? " expanded" : ""}` }, expanded ? toggle : null, box, expanded ? null : toggle);
  }

  expand(index) {
    this.expanded.add(index);
    this.list.refresh(index);
  }

  collapse(index) {
    this.expanded.delete(index);
    this.list.refresh(index);
    // Folding a long message would leave the reader far below it: bring its start back into view.
    this.list.reveal(index);
  }

  stepAnnotations(step) {
    const notes = this.byStep.get(step.id) || [];
    if (!notes.length) return null;
    return h("ul", { class: "annotations" }, notes.map((annotation) => this.item(annotation, step)));
  }

  taskCard(task) {
    const first = this.stepIndex.get(task.first_step_id);
    const last = this.stepIndex.get(task.last_step_id);
    return h("div", { class: "task-card", dataset: { taskId: task.task_id } },
      h("div", { class: "task-title" }, `Task ${task.task_id} · steps ${first + 1}–${last + 1}`),
      h("dl", {},
        h("dt", {}, "Final answer"), h("dd", {}, signed(task.answer_points)),
        h("dt", {}, "Total work"), h("dd", {}, signed(task.work_cost)),
        h("dt", {}, "Task score"), h("dd", { class: "task-score" }, signed(task.score)),
      ),
      task.capped ? h("p", { class: "hint" }, "The combined value is outside −1..+1, so the task score is capped at the limit.") : null,
    );
  }

  annotateStep(step, quote) {
    openAnnotationDialog({ session: this.session, traceId: this.trace.id, step, quote, onSaved: (saved) => this.changed(saved, step, null) });
  }

  /** Selecting text inside one step's content offers to annotate that quote. */
  bindSelection() {
    this.quoteButton = guardWrite(h("button", { class: "quote-button primary", id: "annotate-selection", hidden: true }, "Annotate selection"), this.session);
    this.screen.append(this.quoteButton);
    this.quoteButton.addEventListener("mousedown", (event) => event.preventDefault());
    this.quoteButton.addEventListener("click", () => {
      const pending = this.pendingQuote;
      this.quoteButton.hidden = true;
      if (pending) this.annotateStep(pending.step, pending.quote);
    });
    this.scroller.addEventListener("mouseup", () => setTimeout(() => this.offerQuote(), 0));
    // The offer floats beside the selection; once the text moves away it would point at nothing.
    this.scroller.addEventListener("scroll", () => (this.quoteButton.hidden = true), { passive: true });
    this.scroller.addEventListener("keyup", (event) => event.shiftKey && this.offerQuote());
  }

  offerQuote() {
    const found = this.selectedQuote();
    this.pendingQuote = found;
    if (!found) {
      this.quoteButton.hidden = true;
      return;
    }
    const rect = found.rect;
    this.quoteButton.hidden = false;
    this.quoteButton.style.top = `${Math.max(8, rect.top - 40)}px`;
    this.quoteButton.style.left = `${Math.max(8, rect.left)}px`;
  }

  /** The selection as `{step, quote: {text, prefix, suffix}}` when it lies inside one step's text. */
  selectedQuote() {
    const selection = getSelection();
    if (!selection || selection.isCollapsed || !selection.rangeCount) return null;
    const range = selection.getRangeAt(0);
    const box = closestContent(range.startContainer);
    if (!box || box !== closestContent(range.endContainer)) return null;
    const step = this.trace.steps[this.stepIndex.get(box.dataset.stepId)];
    const before = document.createRange();
    before.setStart(box, 0);
    before.setEnd(range.startContainer, range.startOffset);
    const start = before.toString().length;
    const text = range.toString();
    if (!text.trim() || step.content.slice(start, start + text.length) !== text) return null;
    const end = start + text.length;
    const quote = { text, prefix: step.content.slice(Math.max(0, start - QUOTE_CONTEXT), start), suffix: step.content.slice(end, end + QUOTE_CONTEXT) };
    return { step, quote, rect: range.getBoundingClientRect() };
  }

  /** Select a step: highlighted, kept in view, shown on the minimap. */
  select(index, scroll) {
    if (index < 0 || index >= this.trace.steps.length) return;
    const previous = this.list.row(this.selected);
    if (previous) previous.classList.remove("selected");
    this.selected = index;
    if (scroll) this.list.scrollTo(index);
    else this.list.reveal(index);
    const row = this.list.row(index);
    if (row) row.classList.add("selected");
    this.drawMap(this.list.visibleRange());
  }

  bindKeys() {
    this.keyHandler = (event) => {
      if (!document.body.contains(this.scroller)) {
        document.removeEventListener("keydown", this.keyHandler);
        document.removeEventListener("stash-theme", this.themeListener);
        return;
      }
      // Text inputs and dialogs keep their own keys.
      if (document.querySelector("dialog[open]") || event.target.closest("input, textarea, select, [contenteditable]")) return;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        const start = this.selected < 0 ? this.list.visibleRange()[0] - (event.key === "ArrowDown" ? 1 : 0) : this.selected;
        this.select(start + (event.key === "ArrowDown" ? 1 : -1), true);
      } else if (event.key === "Enter" && this.selected >= 0 && !event.target.closest("button, a, summary")) {
        event.preventDefault();
        this.expand(this.selected);
      } else if (event.key === "Escape") {
        const open = this.selected >= 0 && this.expanded.has(this.selected) ? this.selected : [...this.expanded].pop();
        if (open !== undefined) this.collapse(open);
        this.quoteButton.hidden = true;
      }
    };
    document.addEventListener("keydown", this.keyHandler);
  }

  setFit(fit) {
    this.fit = fit;
    this.fitToggle.querySelector("#minimap-fixed").setAttribute("aria-pressed", String(!fit));
    this.fitToggle.querySelector("#minimap-fit").setAttribute("aria-pressed", String(fit));
    this.drawMap(this.list.visibleRange());
  }

  drawMap(range) {
    const learned = this.learned.modelId ? this.learned.credits : null;
    drawMinimap(this.canvas, this.trace.steps, { fit: this.fit, range, selected: this.selected, learned, completion: this.completion.runs });
  }

  bindMinimap() {
    const stepAt = (event) => {
      const rect = this.canvas.getBoundingClientRect();
      const count = this.trace.steps.length;
      return Math.min(count - 1, Math.max(0, Math.floor(((event.clientX - rect.left) / rect.width) * count)));
    };
    const describe = (index) => {
      this.hover.textContent = hoverText(this.trace, index, this.learned.modelId ? this.learned.credits : null, completionAt(this.completion.runs, index));
    };
    this.canvas.addEventListener("mousemove", (event) => describe(stepAt(event)));
    this.canvas.addEventListener("mouseleave", () => (this.hover.textContent = "\u00a0"));
    // The minimap keeps focus after a click, so ←/→ go on chronologically from there.
    this.canvas.addEventListener("click", (event) => {
      this.select(stepAt(event), true);
      this.canvas.focus();
    });
    this.canvas.addEventListener("keydown", (event) => {
      const move = { ArrowLeft: -1, ArrowRight: 1 }[event.key];
      if (!move) return;
      event.preventDefault();
      event.stopPropagation();
      const next = Math.min(this.trace.steps.length - 1, Math.max(0, this.selected < 0 ? this.list.visibleRange()[0] : this.selected + move));
      this.select(next, true);
      describe(next);
    });
  }
}

/** Whether text is past the compact preview: it is folded until the reader asks for all of it. */
function isLong(text) {
  return text.length > PREVIEW_CHARS || text.split("\n", PREVIEW_LINES + 1).length > PREVIEW_LINES;
}

/** How long folded text is, by what made it long: its lines, or its characters when they are few lines. */
function length(text) {
  const lines = text.split("\n").length;
  return lines > PREVIEW_LINES ? `${lines} lines` : `${text.length.toLocaleString("en")} characters`;
}

/** The header's counts from the annotations, as the API counts them: flagged ratings are left out. */
function countAnnotations(trace) {
  const counted = trace.annotations.filter((annotation) => !annotation.label_error);
  trace.positive_count = counted.filter((annotation) => annotation.rating === 1).length;
  trace.negative_count = counted.filter((annotation) => annotation.rating === -1).length;
  trace.comment_count = trace.annotations.filter((annotation) => annotation.comment).length;
}

function closestContent(node) {
  const element = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
  return element ? element.closest(".content") : null;
}

/** The task scores imported with the trace (`step_scores_source: "imported"`), said to be imported; else null. */
function importedTaskScores(trace) {
  if (trace.step_scores_source !== "imported") return null;
  const scores = (trace.step_scores || []).map((task) => (typeof task === "number" ? task : task && task.score)).filter((score) => typeof score === "number");
  const text = scores.length ? scores.map((score) => signed(score)).join(", ") : "none readable";
  return h("span", { id: "imported-task-scores", title: "Task scores imported with the trace (step_scores); the automatic ones come from the rules" }, `imported task scores ${text}`);
}

/** The imported reward's breakdown lines (its terms and score), shown after the rule breakdown; none if not imported. */
function importedLines(step) {
  const { reward, reward_source: source } = step.metadata;
  if (source !== "imported" || !reward || typeof reward !== "object") return [];
  const terms = Array.isArray(reward.terms) ? reward.terms : [];
  const score = importedScore(step);
  return [
    ...terms.map((term) => [`imported: ${term.reason}`, typeof term.points === "number" ? signed(term.points) : "—"]),
    score === null ? null : ["imported score", signed(score)],
  ];
}

/** One line: step number, recorded time, an excerpt, the credit or why there is none, and the completion. */
function hoverText(trace, index, learned, completion) {
  const step = trace.steps[index];
  const reward = automaticReward(step);
  const status = (trace.evaluation || {}).status;
  const automatic = reward ? `automatic credit ${signed(stepCredit(step))}` : status === "succeeded" ? "not scored (context)" : "pending";
  const credit = !learned ? automatic : learned.has(index) ? `learned credit ${signed(learned.get(index))}` : "no learned credit (not an action)";
  const time = step.metadata.timestamp ? localTime(step.metadata.timestamp) : "untimed";
  const call = step.tool_name ? `${step.tool_name} ${JSON.stringify(step.tool_input ?? {})}` : "";
  const excerpt = (step.content || call).replace(/\s+/g, " ").slice(0, 120);
  return `Step ${index + 1} · ${time} · ${excerpt} · ${credit}${completion ? ` · ${completionText(completion)}` : ""}`;
}
