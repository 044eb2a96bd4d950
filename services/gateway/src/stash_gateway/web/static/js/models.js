// Reward models: the list, the training picker and one model's page (progress, metrics, report, retry, delete,
// download).

import { get, post, query } from "./api.js";
import { deleteButton } from "./deleting.js";
import { guardWrite, h, localTime, navigate, replace, startScreen } from "./dom.js";

const PICKER_PAGE = 500; // the API's largest page
const POLL_MS = 2000;
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
// What the UI trains with (spec: "the current training picker"); base model, epochs and rubric stay the server's.
const TRAINING_CONFIG = { input_version: 3, annotation_source: "automatic" };
const MIN_TRACES = 2;

export async function renderModelList(screen, session) {
  const current = startScreen();
  const models = await get("/reward-models");
  if (!current()) return;
  replace(
    screen,
    h("header", { class: "screen-head" },
      h("h1", {}, "Reward models"),
      h("div", { class: "actions" }, guardWrite(h("button", { class: "primary", id: "open-train", onclick: () => navigate("/models/new") }, "Train a model"), session)),
    ),
    models.length ? modelTable(models) : h("p", { class: "empty" }, "No models yet. Train one on traces you have rated or that were scored automatically."),
  );
}

function modelTable(models) {
  return h("table", { class: "traces", id: "model-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Progress"), h("th", { class: "num" }, "Traces"), h("th", {}, "Created"))),
    h("tbody", {}, models.map((model) => {
      const open = () => navigate(`/models/${encodeURIComponent(model.id)}`);
      return h("tr", { dataset: { modelId: model.id }, tabindex: "0", onclick: open, onkeydown: (event) => event.key === "Enter" && open() },
        h("td", { class: "title" }, h("a", { href: `/models/${encodeURIComponent(model.id)}`, "data-link": "" }, model.name)),
        h("td", {}, statusBadge(model.status)),
        h("td", {}, progressText(model)),
        h("td", { class: "num" }, model.trace_count),
        h("td", {}, localTime(model.created_at)),
      );
    })),
  );
}

function statusBadge(status) {
  return h("span", { class: `status ${status}`, "data-status": status }, status);
}

function progressText(model) {
  const progress = model.progress || {};
  if (model.status === "succeeded") return "done";
  if (model.status === "queued") return "waiting for a worker";
  if (model.status !== "running") return "—";
  if (!progress.total_steps) return "preparing the training pairs and loading the base model";
  const loss = typeof progress.loss === "number" ? ` · loss ${progress.loss.toFixed(3)}` : "";
  return `step ${progress.step} of ${progress.total_steps}${loss}`;
}

// The picker's state survives filtering (and going to a trace and back): the selection is never narrowed by a filter.
const picker = { name: "", selected: new Set(), source_id: "", imported_from: "", imported_to: "" };

export async function renderTrainPicker(screen, session) {
  const current = startScreen();
  const [sources, listing] = await Promise.all([get("/trace-sources"), get(`/traces${pickerQuery()}`)]);
  if (!current()) return;
  const shown = listing.traces.map((trace) => trace.id);
  const redraw = () => renderTrainPicker(screen, session);
  const name = h("input", { id: "train-name", maxlength: "200", value: picker.name, placeholder: "e.g. refunds", oninput: (event) => {
    picker.name = event.target.value;
    showReadiness(parts);
  } });
  const parts = { name, summary: h("p", { class: "hint", id: "picker-selection", role: "status" }), reason: h("p", { class: "hint", id: "train-reason" }), submit: guardWrite(h("button", { type: "submit", class: "primary", id: "train-submit" }, "Train"), session), error: h("p", { class: "form-error", id: "train-error", role: "alert" }), shown, session };
  replace(
    screen,
    h("header", { class: "screen-head" }, h("div", {}, h("a", { class: "back", href: "/models", "data-link": "" }, "← Reward models"), h("h1", {}, "Train a reward model"))),
    h("form", { class: "picker", onsubmit: (event) => train(event, parts) },
      h("div", { class: "filters" }, h("label", { for: "train-name" }, "Name "), name),
      pickerFilters(sources, redraw),
      h("div", { class: "filters" },
        parts.summary,
        h("button", { type: "button", id: "picker-only-shown", onclick: () => {
          picker.selected = new Set(shown);
          redraw();
        } }, "Select only shown"),
        h("button", { type: "button", id: "picker-clear", onclick: () => {
          picker.selected.clear();
          redraw();
        } }, "Clear selection"),
      ),
      pickerTable(listing, parts),
      h("div", { class: "filters" }, parts.submit, parts.reason),
      h("p", { class: "hint picker-note" }, "Trains on automatic step scores and your ratings with the server's base model and defaults. At least two traces, so that evaluation can hold out whole traces."),
      parts.error,
    ),
  );
  showReadiness(parts);
}

function pickerQuery() {
  const { source_id, imported_from, imported_to } = picker;
  return query({ limit: PICKER_PAGE, source_id, imported_from, imported_to, tz: TIME_ZONE });
}

function pickerFilters(sources, redraw) {
  const bind = (field) => (event) => {
    picker[field] = event.target.value;
    redraw();
  };
  return h("div", { class: "filters", role: "search" },
    h("label", {}, "Source ", h("select", { id: "picker-source", onchange: bind("source_id") },
      h("option", { value: "" }, "All sources"),
      sources.map((source) => h("option", { value: source.source_id, selected: source.source_id === picker.source_id }, source.name || source.source_id)),
    )),
    h("label", {}, "Imported from ", h("input", { type: "date", id: "picker-from", value: picker.imported_from, onchange: bind("imported_from") })),
    h("label", {}, "to ", h("input", { type: "date", id: "picker-to", value: picker.imported_to, onchange: bind("imported_to") })),
    h("span", { class: "hint" }, `Dates are inclusive days in ${TIME_ZONE}, matching the Imported column.`),
  );
}

function pickerTable(listing, parts) {
  if (!listing.traces.length) return h("p", { class: "empty" }, "No traces match these filters.");
  const boxes = [];
  const all = h("input", { type: "checkbox", id: "picker-all", "aria-label": "Select or clear every shown trace", onchange: (event) => {
    // Only the shown rows change; selections hidden by the filters stay as they are.
    for (const box of boxes) {
      box.checked = event.target.checked;
      toggle(box.value, box.checked);
    }
    showReadiness(parts);
  } });
  const rows = listing.traces.map((trace) => {
    const box = h("input", { type: "checkbox", value: trace.id, checked: picker.selected.has(trace.id), "aria-label": `Select ${trace.title || trace.id}`, onchange: (event) => {
      toggle(trace.id, event.target.checked);
      showReadiness(parts);
    } });
    boxes.push(box);
    return h("tr", { dataset: { traceId: trace.id } },
      h("td", {}, box),
      h("td", { class: "title" }, trace.title || "(untitled)"),
      h("td", {}, trace.source_name || trace.source_id),
      h("td", { class: "num" }, trace.step_count),
      h("td", {}, localTime(trace.created_at)),
      h("td", { class: "num" }, `+${trace.positive_count} / −${trace.negative_count}`),
    );
  });
  parts.all = all;
  parts.boxes = boxes;
  const more = listing.total > listing.traces.length ? h("p", { class: "hint", id: "picker-more" }, `Showing the newest ${listing.traces.length} of ${listing.total}; narrow the filters to see the rest.`) : null;
  return [
    h("table", { class: "traces picker-table", id: "picker-table" },
      h("thead", {}, h("tr", {}, h("th", {}, all), h("th", {}, "Title"), h("th", {}, "Source"), h("th", { class: "num" }, "Steps"), h("th", {}, "Imported"), h("th", { class: "num" }, "Ratings"))),
      h("tbody", {}, rows),
    ),
    more,
  ];
}

function toggle(traceId, selected) {
  if (selected) picker.selected.add(traceId);
  else picker.selected.delete(traceId);
}

function showReadiness(parts) {
  const count = picker.selected.size;
  const shown = new Set(parts.shown);
  const hidden = [...picker.selected].filter((id) => !shown.has(id)).length;
  parts.summary.textContent = `${count} selected` + (hidden ? ` · ${hidden} hidden by the filters` : "");
  if (parts.all) {
    const checked = parts.boxes.filter((box) => box.checked).length;
    parts.all.checked = checked > 0 && checked === parts.boxes.length;
    parts.all.indeterminate = checked > 0 && checked < parts.boxes.length;
  }
  const reason = !picker.name.trim() ? "Name the model." : count < MIN_TRACES ? `Select at least ${MIN_TRACES} traces: evaluation holds out whole traces.` : "";
  parts.reason.textContent = parts.session.read_only ? "" : reason;
  if (!parts.session.read_only) parts.submit.disabled = Boolean(reason);
}

async function train(event, parts) {
  event.preventDefault();
  parts.error.textContent = "";
  parts.submit.disabled = true;
  try {
    const model = await post("/reward-models", { name: picker.name.trim(), trace_ids: [...picker.selected], training_config: TRAINING_CONFIG });
    picker.name = "";
    picker.selected.clear();
    navigate(`/models/${encodeURIComponent(model.id)}`);
  } catch (failure) {
    parts.error.textContent = failure.message;
    parts.submit.disabled = false;
  }
}

export async function renderModel(screen, session, modelId) {
  const current = startScreen();
  const model = await get(`/reward-models/${encodeURIComponent(modelId)}`);
  if (!current()) return;
  const reportBox = h("section", { class: "card report", id: "learning-report", hidden: true }, learningReport(model));
  replace(
    screen,
    h("header", { class: "screen-head" },
      h("div", {}, h("a", { class: "back", href: "/models", "data-link": "" }, "← Reward models"), h("h1", { id: "model-name" }, model.name),
        h("p", { class: "meta" }, statusBadge(model.status), h("span", {}, `${model.trace_count} traces`), h("span", {}, `created ${localTime(model.created_at)}`), h("span", {}, model.base_model))),
      h("div", { class: "actions" },
        model.status === "succeeded" ? guardWrite(h("button", { id: "write-skill", onclick: () => navigate(`/skills?model=${encodeURIComponent(model.id)}`) }, "Write a skill (GEPA)"), session) : null,
        model.status === "succeeded" ? h("button", { id: "download-checkpoint", onclick: (event) => downloadCheckpoint(event.target, model.id) }, "Download checkpoint") : null,
        h("button", { id: "view-report", onclick: () => (reportBox.hidden = !reportBox.hidden) }, "View learning report"),
        deleteButton(session, model, {
          id: "delete-model", label: "Delete model", noun: "model", path: `/reward-models/${encodeURIComponent(model.id)}`, back: "/models",
          question: `Delete the reward model “${model.name}”? Its checkpoint and the action credit it gave are deleted too; skills written with it stay.`,
        }),
      ),
    ),
    h("div", { class: "model-body" },
      model.status === "failed" ? failure(screen, session, model) : h("p", { id: "model-progress" }, progressText(model)),
      model.metrics ? metricList(model) : null,
      reportBox,
    ),
  );
  if (model.status === "queued" || model.status === "running") {
    setTimeout(() => current() && renderModel(screen, session, modelId), POLL_MS);
  }
}

/** Why training failed; Retry only where a retry can succeed, otherwise what to do instead. */
function failure(screen, session, model) {
  const error = h("p", { class: "form-error", role: "alert" });
  if (!model.retryable) {
    return h("div", { class: "notice failed", id: "model-error" }, h("strong", {}, "Training failed: "), h("span", { id: "model-error-text" }, model.error),
      h("p", { class: "hint", id: "model-no-retry" }, "A retry would fail the same way. ", h("a", { href: "/models/new", "data-link": "" }, "Train a new model"), " with other traces, or delete this one."));
  }
  const retry = guardWrite(h("button", { id: "retry-model", onclick: async () => {
    retry.disabled = true;
    try {
      await post(`/reward-models/${encodeURIComponent(model.id)}/retry`);
      renderModel(screen, session, model.id);
    } catch (failed) {
      error.textContent = failed.message;
      retry.disabled = false;
    }
  } }, "Retry"), session);
  return h("div", { class: "notice failed", id: "model-error" }, h("strong", {}, "Training failed: "), h("span", { id: "model-error-text" }, model.error), " ", retry, error);
}

const count = (number, noun) => `${number} ${noun}${number === 1 ? "" : "s"}`;

/** The metrics in plain words as the gateway reads them (`quality`): each accuracy with its count and 95 % interval,
 * the final loss beside chance, and a warning when training left it there. */
function metricList(model) {
  const { metrics, quality } = model;
  const lines = [
    ["Held-out accuracy", quality.eval.summary],
    ["Action accuracy", quality.action_eval.summary],
    ["Tool-call accuracy", quality.tool_eval.summary],
  ];
  const built = model.num_pairs !== null && model.num_pairs !== undefined ? ` of ${model.num_pairs} built` : "";
  lines.push(["Trained on", `${count(metrics.train_pairs, "pair")} (${metrics.action_train_pairs ?? 0} compare two actions)${built}`]);
  lines.push(["Held out", `${count(metrics.eval_pairs, "pair")} from whole traces the model never saw; ${count(metrics.excluded_cross_trace_pairs, "pair")} left out because they span both sides`]);
  lines.push(["Final loss", quality.loss.summary]);
  lines.push(["Run", `${count(metrics.epochs, "epoch")} on ${metrics.device} in ${Math.round(metrics.seconds)} s`]);
  return [
    quality.loss.warning ? h("p", { class: "notice warning", id: "model-loss-warning", role: "status" }, h("strong", {}, "Warning: "), quality.loss.warning) : null,
    h("dl", { class: "metrics", id: "model-metrics" }, lines.map(([term, text]) => [h("dt", {}, term), h("dd", {}, text)])),
  ];
}

function learningReport(model) {
  const feedback = model.feedback;
  if (feedback === null || feedback === undefined) return [h("h2", {}, "Learning report"), h("p", { class: "hint" }, "No learning report was recorded for this model (the feedback classifier runs only with an LLM key configured).")];
  const earlier = model.feedback_from_earlier_attempt
    ? h("p", { class: "notice warning", id: "report-earlier" }, "This report is from the previous attempt; the retry replaces it once it has assessed the traces again.")
    : null;
  if (!feedback.length) return [h("h2", {}, "Learning report"), earlier, h("p", { class: "hint" }, "The classifier found nothing to learn from in these traces.")];
  return [
    h("h2", {}, `Learning report (${feedback.length} findings)`),
    earlier,
    h("ul", { class: "findings" }, feedback.map((item) => h("li", {},
      h("strong", {}, item.label.replaceAll("_", " ")), ` (${item.confidence}, ${item.source}) `,
      h("a", { href: `/traces/${encodeURIComponent(item.trace_id)}`, "data-link": "" }, `step ${item.step_index + 1}`),
      item.included_in_evaluation ? " · held out for evaluation" : item.included_in_training ? " · trained on" : " · not trained on",
      h("p", { class: "hint" }, item.reason),
      item.pair_exclusion ? h("p", { class: "hint exclusion" }, `No pair: ${item.pair_exclusion}`) : null,
    ))),
  ];
}

async function downloadCheckpoint(button, modelId) {
  button.disabled = true;
  try {
    const { url } = await get(`/reward-models/${encodeURIComponent(modelId)}/weights`);
    const link = h("a", { href: url, download: "" });
    document.body.append(link);
    link.click();
    link.remove();
  } finally {
    button.disabled = false;
  }
}
