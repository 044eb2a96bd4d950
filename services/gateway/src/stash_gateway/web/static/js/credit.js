// Learned action credit in the trace view: choose the shared evaluator or a trained model (score the trace's
// actions with it), and show each action's credit (−1..+1, relative to the model's training reference) as
// badges, row highlights and the minimap's heatmap. The shared evaluator's credit is shown by default once a
// release exists.

import { get, post } from "./api.js";
import { guardWrite, h, reviewerReason } from "./dom.js";

const POLL_MS = 2000;
const POLLS_MAX = 150;
/** The credit source value of the shared evaluator in the picker (model ids are UUIDs). */
export const SHARED = "shared-evaluator";
export const NO_RELEASE = "No shared evaluator released yet.";

/** Whether a shared evaluator release exists (the trace view then shows its credit by default). */
export function hasRelease(trace) {
  const shared = trace.shared_evaluator;
  return Boolean(shared && shared.current_release !== null && shared.current_release !== undefined);
}

/** The name the badges and the legend give the chosen credit source. */
export function sourceName(view) {
  if (view.learned.modelId === SHARED) return `shared evaluator release ${view.trace.shared_evaluator.release ?? view.trace.shared_evaluator.current_release}`;
  const model = view.learned.models.find((item) => item.id === view.learned.modelId);
  return model ? model.name : null;
}

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
  if (modelId === SHARED) {
    for (const score of (trace.shared_evaluator || {}).action_scores || []) {
      const index = stepIndex.get(score.step_id);
      if (index !== undefined) credits.set(index, score.credit);
    }
    return credits;
  }
  for (const score of trace.action_scores || []) {
    const index = stepIndex.get(score.step_id);
    if (score.reward_model_id === modelId && index !== undefined) credits.set(index, score.credit);
  }
  return credits;
}

/** The credit picker (the shared evaluator, the caller's models), and for a model the Score actions button and
 * its latest scoring run's state; for the shared evaluator, which release scored the trace or why none did. */
export function creditControl(view) {
  const { models, modelId } = view.learned;
  if (view.trace.reviewing) return h("span", { class: "hint", id: "credit-none", title: reviewerReason("score it with a reward model") }, "Learned credit comes from the owner's models, which stay private.");
  const released = hasRelease(view.trace);
  const noRelease = released ? null : h("span", { class: "hint", id: "shared-none" }, NO_RELEASE);
  if (!models.length && !released) return h("div", { class: "credit-control" }, noRelease, h("span", { class: "hint", id: "credit-none" }, "Train a reward model to see learned action credit."));
  const choose = h("select", { id: "credit-model", "aria-label": "Learned action credit", onchange: (event) => view.chooseModel(event.target.value) },
    h("option", { value: "" }, "Automatic step scores"),
    released ? h("option", { value: SHARED, selected: modelId === SHARED }, `Shared evaluator (release ${view.trace.shared_evaluator.current_release})`) : null,
    models.map((model) => h("option", { value: model.id, selected: model.id === modelId }, `Learned credit: ${model.name}`)),
  );
  if (modelId === SHARED) return h("div", { class: "credit-control" }, choose, sharedStatus(view.trace.shared_evaluator));
  const run = latestRun(view.trace, modelId);
  const status = h("span", { class: "hint", id: "scoring-status", role: "status" }, runText(run, view.learned.credits.size));
  const busy = run && (run.status === "queued" || run.status === "running");
  const label = run && run.status === "failed" ? "Retry scoring" : "Score actions";
  const score = guardWrite(h("button", { id: "score-actions", disabled: !modelId || busy, title: "Score every agent response and tool call with this model", onclick: () => startScoring(view, score, status) }, label), view.session);
  if (busy) watchRun(view, modelId);
  return h("div", { class: "credit-control" }, choose, score, status, noRelease);
}

/** Which release scored the trace, and whether it is the current one; or why no release did. */
function sharedStatus(shared) {
  const text = shared.release === null
    ? shared.reason
    : shared.release === shared.current_release
      ? `Release ${shared.release}: ${shared.action_scores.length} actions scored`
      : `Release ${shared.release}'s scores, until release ${shared.current_release} rescores this trace`;
  return h("span", { class: "hint", id: "shared-status", role: "status" }, text);
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
