// Learned action credit in the trace view: choose a trained model, score the trace's actions with it, and
// show each action's credit (−1..+1, relative to the model's training reference) as badges, row highlights
// and the minimap's heatmap.

import { get, post } from "./api.js";
import { guardWrite, h } from "./dom.js";

const POLL_MS = 2000;
const POLLS_MAX = 150;

/** The caller's models that can score actions (succeeded, trained with action comparisons); none if the trainer is out of reach. */
export async function scoringModels() {
  try {
    const models = await get("/reward-models");
    return models.filter((model) => model.status === "succeeded" && (model.metrics || {}).action_scoring_version);
  } catch {
    return [];
  }
}

/** Step index → credit of the chosen model's action scores (empty when none is chosen). */
export function creditsOf(trace, stepIndex, modelId) {
  const credits = new Map();
  if (!modelId) return credits;
  for (const score of trace.action_scores || []) {
    const index = stepIndex.get(score.step_id);
    if (score.reward_model_id === modelId && index !== undefined) credits.set(index, score.credit);
  }
  return credits;
}

/** The model picker, the Score actions button and the latest scoring run's state for the chosen model. */
export function creditControl(view) {
  const { models, modelId } = view.learned;
  if (!models.length) return h("span", { class: "hint", id: "credit-none" }, "Train a reward model to see learned action credit.");
  const choose = h("select", { id: "credit-model", "aria-label": "Learned action credit", onchange: (event) => view.chooseModel(event.target.value) },
    h("option", { value: "" }, "Automatic step scores"),
    models.map((model) => h("option", { value: model.id, selected: model.id === modelId }, `Learned credit: ${model.name}`)),
  );
  const run = latestRun(view.trace, modelId);
  const status = h("span", { class: "hint", id: "scoring-status", role: "status" }, runText(run, view.learned.credits.size));
  const busy = run && (run.status === "queued" || run.status === "running");
  const label = run && run.status === "failed" ? "Retry scoring" : "Score actions";
  const score = guardWrite(h("button", { id: "score-actions", disabled: !modelId || busy, title: "Score every agent response and tool call with this model", onclick: () => startScoring(view, score, status) }, label), view.session);
  if (busy) watchRun(view, modelId);
  return h("div", { class: "credit-control" }, choose, score, status);
}

function latestRun(trace, modelId) {
  const runs = (trace.scoring_runs || []).filter((run) => run.reward_model_id === modelId);
  return runs.sort((a, b) => (a.created_at < b.created_at ? 1 : -1))[0] || null;
}

function runText(run, scored) {
  if (!run) return scored ? `${scored} actions scored` : "";
  if (run.status === "queued" || run.status === "running") return `Scoring actions… (${run.status})`;
  if (run.status === "failed") return `Scoring failed: ${run.error || "no reason recorded"}`;
  return `${scored} actions scored`;
}

async function startScoring(view, button, status) {
  button.disabled = true;
  status.textContent = "Scoring actions… (queued)";
  try {
    const run = await post(`/traces/${encodeURIComponent(view.trace.id)}/score`, { reward_model_id: view.learned.modelId });
    view.trace.scoring_runs = [...(view.trace.scoring_runs || []).filter((item) => item.id !== run.id), run];
    if (run.status === "succeeded") view.redraw(await get(`/traces/${encodeURIComponent(view.trace.id)}`));
    else watchRun(view, run.reward_model_id);
  } catch (error) {
    status.textContent = `Scoring failed: ${error.message}`;
    button.disabled = false;
  }
}

/** Look again until the model's run on this trace finished, then redraw with its scores (or its error). */
function watchRun(view, modelId, polls = 0) {
  if (view.learned.watching === modelId || polls >= POLLS_MAX) return;
  view.learned.watching = modelId;
  setTimeout(async () => {
    view.learned.watching = null;
    if (!document.body.contains(view.scroller) || view.learned.modelId !== modelId) return;
    const fresh = await get(`/traces/${encodeURIComponent(view.trace.id)}`);
    const run = latestRun(fresh, modelId);
    if (run && (run.status === "queued" || run.status === "running")) watchRun(view, modelId, polls + 1);
    else view.redraw(fresh);
  }, POLL_MS);
}
