// Skills (GEPA): start a run against a succeeded reward model, the runs list, and one run's page with the
// best and seed skills, every candidate's diff against the seed, the SKILL.md download, retry and delete.

import { get, post } from "./api.js";
import { deleteButton } from "./deleting.js";
import { guardWrite, h, localTime, navigate, replace, startScreen } from "./dom.js";

const POLL_MS = 2000;
const DEFAULT_CALLS = 40;

export async function renderSkillRuns(screen, session) {
  const current = startScreen();
  const [runs, models, defaults] = await Promise.all([get("/gepa-runs"), get("/reward-models"), get("/gepa-defaults")]);
  if (!current()) return;
  const names = new Map(models.map((model) => [model.id, model.name]));
  const succeeded = models.filter((model) => model.status === "succeeded");
  replace(
    screen,
    h("header", { class: "screen-head" }, h("h1", {}, "Skills (GEPA)")),
    startForm(session, succeeded, new URLSearchParams(location.search).get("model"), defaults),
    runs.length ? runTable(runs, names) : h("p", { class: "empty" }, "No runs yet."),
  );
}

function startForm(session, models, chosen, defaults) {
  if (!models.length) return h("p", { class: "notice", id: "gepa-no-model" }, "A run needs a succeeded reward model: train one first.");
  const field = (id, label, attrs) => h("label", { for: id }, label, h("input", { id, oninput: () => showMissing(parts, defaults), ...attrs }));
  const model = h("select", { id: "gepa-model" }, models.map((item) => h("option", { value: item.id, selected: item.id === chosen }, item.name)));
  const error = h("p", { class: "form-error", id: "gepa-error", role: "alert" });
  const submit = guardWrite(h("button", { type: "submit", class: "primary", id: "gepa-submit" }, "Start a run"), session);
  const parts = { model, error, submit, missing: h("p", { class: "hint gepa-missing", id: "gepa-missing", role: "status" }), session };
  const form = h("form", { class: "card gepa-form", id: "gepa-form", onsubmit: (event) => startRun(event, parts) },
    h("h2", {}, "Write a SKILL.md against a reward model"),
    h("div", { class: "gepa-fields" },
      h("label", { for: "gepa-model" }, "Reward model", model),
      field("gepa-task-model", "Task model", { placeholder: defaults.task_model }),
      field("gepa-task-base", "Task API base (OpenAI-compatible server)", { placeholder: "optional, e.g. http://vllm:8000/v1" }),
      field("gepa-reflection-model", "Reflection model", { placeholder: defaults.reflection_model }),
      field("gepa-calls", "Metric calls", { type: "number", min: "1", value: String(DEFAULT_CALLS) }),
    ),
    h("p", { class: "hint" }, "Empty fields take the server's defaults. Provider keys are set in the gepa service's environment."),
    error,
    h("div", { class: "gepa-start" }, submit, parts.missing),
  );
  showMissing(parts, defaults);
  return form;
}

/** What an empty model field would leave the run without: the default's missing setting, said by the button. */
function showMissing(parts, defaults) {
  const value = (id) => (document.getElementById(id) || { value: "" }).value.trim();
  const lacks = (id, role, model, missing) =>
    !value(id) && missing ? `No ${role} model: the default, ${model}, needs ${missing} in the gepa service's environment. Name a ${role} model (any LiteLLM model string), or have the operator set ${missing}.` : null;
  const reasons = [
    lacks("gepa-task-model", "task", defaults.task_model, defaults.task_model_missing),
    lacks("gepa-reflection-model", "reflection", defaults.reflection_model, defaults.reflection_model_missing),
  ].filter(Boolean);
  parts.missing.textContent = reasons.join(" ");
  if (!parts.session.read_only) parts.submit.disabled = reasons.length > 0;
  parts.submit.title = reasons.join(" ");
}

async function startRun(event, { model, error, submit }) {
  event.preventDefault();
  error.textContent = "";
  const value = (id) => document.getElementById(id).value.trim();
  const body = { reward_model_id: model.value, max_metric_calls: Number(value("gepa-calls")) };
  for (const [name, id] of [["task_model", "gepa-task-model"], ["task_api_base", "gepa-task-base"], ["reflection_model", "gepa-reflection-model"]]) {
    if (value(id)) body[name] = value(id);
  }
  submit.disabled = true;
  try {
    const run = await post("/gepa-runs", body);
    navigate(`/skills/${encodeURIComponent(run.id)}`);
  } catch (failure) {
    error.textContent = failure.message;
    submit.disabled = false;
  }
}

function runTable(runs, names) {
  return h("table", { class: "traces", id: "gepa-runs" },
    h("thead", {}, h("tr", {}, h("th", {}, "Skill"), h("th", {}, "Reward model"), h("th", {}, "Status"), h("th", {}, "Metric calls"), h("th", { class: "num" }, "Best / seed"), h("th", {}, "Created"))),
    h("tbody", {}, runs.map((run) => {
      const open = () => navigate(`/skills/${encodeURIComponent(run.id)}`);
      return h("tr", { dataset: { runId: run.id }, tabindex: "0", onclick: open, onkeydown: (event) => event.key === "Enter" && open() },
        h("td", { class: "title" }, h("a", { href: `/skills/${encodeURIComponent(run.id)}`, "data-link": "" }, run.skill_name || "(not named yet)")),
        h("td", {}, names.get(run.reward_model_id) || h("span", { class: "hint", title: run.reward_model_id }, "a deleted model")),
        h("td", {}, h("span", { class: `status ${run.status}` }, run.status)),
        h("td", {}, callsText(run)),
        h("td", { class: "num" }, scorePair(run)),
        h("td", {}, localTime(run.created_at)),
      );
    })),
  );
}

// GEPA may finish the evaluation round it is in past the budget, so "used" can exceed it.
const callsText = (run) => `${run.progress ?? 0} metric calls used (budget ${run.max_metric_calls})`;
const score = (value) => (value === null || value === undefined ? "—" : value.toFixed(2));
const scorePair = (run) => `${score(run.best_score)} / ${score(run.seed_score)}`;

export async function renderSkillRun(screen, session, runId) {
  const current = startScreen();
  const run = await get(`/gepa-runs/${encodeURIComponent(runId)}`);
  if (!current()) return;
  const running = run.status === "queued" || run.status === "running";
  replace(
    screen,
    h("header", { class: "screen-head" },
      h("div", {}, h("a", { class: "back", href: "/skills", "data-link": "" }, "← Skills"),
        h("h1", { id: "skill-name" }, run.skill_name || (run.status === "failed" ? "No skill: the run failed" : "A skill in the making")),
        h("p", { class: "meta" }, h("span", { class: `status ${run.status}`, id: "gepa-status" }, run.status),
          h("span", { id: "gepa-progress" }, callsText(run)),
          h("span", {}, `task ${run.task_model} · reflection ${run.reflection_model}`),
          run.train_examples !== null ? h("span", {}, `${run.train_examples} train / ${run.validation_examples} validation examples`) : null)),
      h("div", { class: "actions" },
        run.status === "succeeded" ? h("a", { class: "button primary", id: "download-skill", href: `/api/v1/rm/gepa-runs/${encodeURIComponent(run.id)}/skill`, download: "SKILL.md" }, "Download SKILL.md") : null,
        deleteButton(session, run, {
          id: "delete-run", label: "Delete run", noun: "run", path: `/gepa-runs/${encodeURIComponent(run.id)}`, back: "/skills",
          question: "Delete this GEPA run with its skill? A SKILL.md you downloaded stays where you saved it.",
        })),
    ),
    h("div", { class: "model-body" },
      run.budget_warning ? h("p", { class: "notice", id: "budget-warning" }, `Budget: ${run.budget_warning}`) : null,
      run.status === "failed" ? failure(screen, session, run) : null,
      run.skill_description ? h("p", { id: "skill-description" }, run.skill_description) : null,
      run.status === "succeeded" ? results(run) : null,
      run.example_failures.length ? h("section", { class: "card report", id: "example-failures" }, h("h2", {}, "Examples the task model failed on (scored 0)"),
        h("ul", { class: "findings" }, run.example_failures.map((item) => h("li", {}, h("a", { href: `/traces/${encodeURIComponent(item.trace_id)}`, "data-link": "" }, item.trace_id), `: ${item.error}`)))) : null,
    ),
  );
  if (running) setTimeout(() => current() && renderSkillRun(screen, session, runId), POLL_MS);
}

/** Why the run failed; Retry only where a retry can succeed, otherwise what to do instead. */
function failure(screen, session, run) {
  const error = h("p", { class: "form-error", role: "alert" });
  if (!run.retryable) {
    return h("div", { class: "notice failed", id: "gepa-error" }, h("strong", {}, "The run failed: "), h("span", { id: "gepa-error-text" }, run.error),
      h("p", { class: "hint", id: "gepa-no-retry" }, "A retry would fail the same way: start a new run, or delete this one."));
  }
  const retry = guardWrite(h("button", { id: "retry-gepa", onclick: async () => {
    retry.disabled = true;
    try {
      await post(`/gepa-runs/${encodeURIComponent(run.id)}/retry`);
      renderSkillRun(screen, session, run.id);
    } catch (failed) {
      error.textContent = failed.message;
      retry.disabled = false;
    }
  } }, "Retry"), session);
  return h("div", { class: "notice failed", id: "gepa-error" }, h("strong", {}, "The run failed: "), h("span", { id: "gepa-error-text" }, run.error), " ", retry, error);
}

function results(run) {
  return [
    h("dl", { class: "metrics", id: "gepa-scores" },
      h("dt", {}, "Best skill"), h("dd", { id: "best-score" }, `${score(run.best_score)} (reward-model score on 0…1 over the validation examples)`),
      h("dt", {}, "Seed skill"), h("dd", { id: "seed-score" }, score(run.seed_score)),
      h("dt", {}, "Candidates"), h("dd", {}, String(run.candidates.length)),
    ),
    h("section", { class: "card report" }, h("h2", {}, "Best skill"), h("pre", { class: "skill", id: "best-skill" }, run.best_skill)),
    h("section", { class: "card report", id: "candidates" }, h("h2", {}, "Candidates, each against the seed"),
      run.candidates.map((candidate, number) => h("details", { class: "candidate", open: candidate.skill === run.best_skill },
        h("summary", {}, `Candidate ${number + 1} · score ${score(candidate.score)}${candidate.skill === run.best_skill ? " · best" : ""}${candidate.skill === run.seed_skill ? " · the seed" : ""}`),
        diffView(run.seed_skill, candidate.skill),
      )),
    ),
  ];
}

/** Line-by-line diff of `after` against `before` (longest common subsequence; skills are short). */
export function lineDiff(before, after) {
  const a = before.split("\n");
  const b = after.split("\n");
  const common = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  }
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      lines.push({ op: " ", text: a[i] });
      i += 1;
      j += 1;
    } else if (j < b.length && (i >= a.length || common[i][j + 1] >= common[i + 1][j])) lines.push({ op: "+", text: b[j++] });
    else lines.push({ op: "-", text: a[i++] });
  }
  return lines;
}

function diffView(before, after) {
  return h("pre", { class: "diff" }, lineDiff(before, after).map((line) =>
    h("span", { class: line.op === "+" ? "added" : line.op === "-" ? "removed" : "same" }, `${line.op} ${line.text}\n`)));
}
