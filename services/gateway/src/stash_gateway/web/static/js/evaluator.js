// The shared evaluator: its releases with their notes and accuracy (everyone), the account's consent (give for
// all traces, revoke, see what it contributed), the independent review queue (context, then actions A and B in
// an order drawn for the reviewer, no origin), and for the operator, who types the admin key (kept in this
// page's memory only), the candidates with their benchmark reports and gate decisions and the corpus statistics.

import { ApiError, adminGet, del, get, post, put } from "./api.js";
import { guardWrite, h, localTime, replace, startScreen } from "./dom.js";

// The consent text the page shows; its version is recorded with the consent.
const CONSENT_VERSION = "2026-12-v1";
const CONSENT_TEXT =
  "Your traces and annotations may be turned into comparisons of agent actions, reviewed by people other than you, " +
  "and used to train and benchmark the shared evaluator. You can revoke this at any time; later snapshots, benchmarks " +
  "and review queues then leave your data out.";
const VERDICTS = [
  { verdict: "better", label: "A is better", id: "a-better" },
  { verdict: "worse", label: "B is better", id: "b-better" },
  { verdict: "tie", label: "Tie", id: "tie" },
  { verdict: "invalid", label: "Invalid", id: "invalid" },
];

export async function renderEvaluator(screen, session) {
  const current = startScreen();
  const [consent, queue, released] = await Promise.all([get("/evaluator/consent"), loadQueue(), get("/evaluator/releases")]);
  if (!current()) return;
  replace(
    screen,
    h("header", { class: "screen-head" }, h("h1", {}, "Shared evaluator")),
    releasesSection(released),
    consentCard(screen, session, consent),
    queueSection(screen, session, queue),
    operatorSection(),
  );
}

function percent(value) {
  return value === null || value === undefined ? "–" : `${(value * 100).toFixed(1)} %`;
}

function reportTable(report = []) {
  if (!report.length) return h("p", { class: "hint" }, "No benchmark report.");
  const slices = (entry) =>
    Object.entries(entry.slices)
      .flatMap(([dimension, values]) => Object.entries(values).map(([value, part]) => `${dimension}=${value}: ${percent(part.accuracy)} (n=${part.n})`))
      .join(" · ");
  return h(
    "table",
    { class: "evaluator-report" },
    h("thead", {}, h("tr", {}, h("th", {}, "Benchmark"), h("th", {}, "Accuracy"), h("th", {}, "95 % interval"), h("th", {}, "n"), h("th", {}, "Slices"))),
    h(
      "tbody",
      {},
      report.map((entry) =>
        h("tr", {}, h("td", {}, `${entry.name} v${entry.version}`), h("td", { class: "report-accuracy" }, percent(entry.accuracy)), h("td", {}, `${percent(entry.low)} – ${percent(entry.high)}`), h("td", {}, String(entry.n)), h("td", { class: "hint" }, slices(entry))),
      ),
    ),
  );
}

function releasesSection(released) {
  const head = h("h2", {}, "Releases");
  if (!released.releases.length) return h("section", { class: "card evaluator-releases", id: "evaluator-releases" }, head, h("p", { class: "empty", id: "no-release" }, "No shared evaluator released yet: traces are scored once the operator releases the first one."));
  return h(
    "section",
    { class: "card evaluator-releases", id: "evaluator-releases" },
    head,
    released.releases.map((release) =>
      h(
        "article",
        { class: "release", dataset: { release: String(release.number) } },
        h("h3", {}, `Release ${release.number}`, release.current ? h("span", { class: "badge current-release" }, "current") : null, release.published ? null : h("span", { class: "badge" }, "publishing")),
        h("p", { class: "hint" }, `Released ${localTime(release.released_at)} by ${release.released_by}.`),
        h("p", { class: "release-notes" }, release.notes),
        reportTable(release.report),
      ),
    ),
  );
}

function operatorSection() {
  const key = h("input", { type: "password", id: "admin-key", placeholder: "Admin key", autocomplete: "off" });
  const error = h("p", { class: "form-error", role: "alert" });
  const body = h("div", { id: "operator-view" });
  const show = async () => {
    error.textContent = "";
    body.replaceChildren();
    try {
      const [candidates, stats] = await Promise.all([adminGet("evaluator/candidates", key.value), adminGet("evaluator/stats", key.value)]);
      replace(body, statsCard(stats), candidatesList(candidates));
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  return h(
    "section",
    { class: "evaluator-operator", id: "evaluator-operator" },
    h("h2", {}, "Operator"),
    h("p", { class: "hint" }, "Candidates, their benchmark reports and gate decisions, and the corpus statistics need the admin key; it stays in this page only."),
    h("div", { class: "actions" }, key, h("button", { id: "operator-show", onclick: show }, "Show candidates")),
    error,
    body,
  );
}

function statsCard(stats) {
  const counts = stats.stats.by_status || {};
  const text = Object.entries(counts).map(([status, count]) => `${count} ${status}`).join(", ") || "no comparisons yet";
  return h("p", { class: "hint", id: "corpus-stats" }, `Corpus: ${text}; ${stats.reviewer_ids.length} reviewers; ${(stats.disagreements || []).length} disagreements.`);
}

function candidatesList(candidates) {
  if (!candidates.length) return h("p", { class: "empty", id: "no-candidates" }, "No candidate yet: `stash-rm evaluator train` starts one.");
  return candidates.map((candidate) => {
    const gate = candidate.gate || {};
    const against = gate.compared_with ? `release ${gate.compared_with}` : "no evaluator";
    const decision = candidate.status === "training" || candidate.status === "evaluating" ? "Not gated yet." : gate.passed ? `Passed the gate against ${against}.` : `Refused against ${against}: ${candidate.reason}`;
    return h(
      "article",
      { class: `card candidate candidate-${candidate.status}`, dataset: { candidate: candidate.id } },
      h("h3", {}, `Candidate of ${localTime(candidate.created_at)}`, h("span", { class: "badge candidate-status" }, candidate.status.replace("_", " "))),
      h("p", { class: "hint" }, `Started by ${candidate.created_by}; snapshot ${candidate.snapshot_id}; ${candidate.num_pairs} pairs; ${candidate.policy.epochs} epoch(s); benchmarks ${(candidate.benchmarks || []).map((b) => `${b.name} v${b.version}`).join(", ")}.`),
      h("p", { class: "gate-decision" }, decision),
      reportTable(candidate.report),
    );
  });
}

async function loadQueue() {
  try {
    return await get("/evaluator/review-queue?limit=10");
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return { notReviewer: error.message };
    throw error;
  }
}

function consentCard(screen, session, consent) {
  const open = consent.consents.find((item) => !item.revoked_at);
  const error = h("p", { class: "form-error", id: "consent-error", role: "alert" });
  const redraw = () => renderEvaluator(screen, session);
  const act = async (call) => {
    try {
      await call();
      await redraw();
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const status = open
    ? h("p", { id: "consent-status" }, `Sharing ${open.all_sources ? "all your traces" : `sources ${open.source_ids.join(", ")}`} since ${localTime(open.granted_at)} (consent text ${open.text_version}).`)
    : h("p", { id: "consent-status" }, consent.stopped_at ? `Not sharing: you stopped on ${localTime(consent.stopped_at)}.` : "Not sharing: your data does not improve the shared evaluator.");
  const button = open
    ? guardWrite(h("button", { id: "consent-revoke", onclick: () => act(() => del("/evaluator/consent")) }, "Revoke consent"), session)
    : guardWrite(h("button", { class: "primary", id: "consent-grant", onclick: () => act(() => put("/evaluator/consent", { text_version: CONSENT_VERSION, all_sources: true })) }, "Share all my traces"), session);
  return h(
    "section",
    { class: "card evaluator-consent", id: "evaluator-consent" },
    h("h2", {}, "Your consent"),
    h("p", { class: "hint" }, CONSENT_TEXT),
    status,
    h("p", { class: "hint", id: "consent-contributed" }, `${consent.contributed_comparisons} ${consent.contributed_comparisons === 1 ? "comparison" : "comparisons"} came from your data.`),
    error,
    button,
  );
}

function queueSection(screen, session, queue) {
  const head = h("h2", {}, "Review queue");
  if (queue.notReviewer) return h("section", { class: "evaluator-queue", id: "review-queue" }, head, h("p", { class: "notice", id: "not-reviewer" }, `You are not an evaluator reviewer: ${queue.notReviewer}.`));
  if (!queue.length) return h("section", { class: "evaluator-queue", id: "review-queue" }, head, h("p", { class: "empty", id: "queue-empty" }, "Nothing to review: comparisons you authored or from your traces never appear here."));
  return h(
    "section",
    { class: "evaluator-queue", id: "review-queue" },
    head,
    h("p", { class: "hint" }, "Each comparison shows two agent actions, A and B (highlighted), each after the conversation that led up to it; the two may come at different points of a conversation. Which action is better?"),
    queue.map((item) => comparisonCard(screen, session, item)),
  );
}

function comparisonCard(screen, session, item) {
  const note = h("input", { class: "review-note", placeholder: "Note (optional)", maxlength: "2000" });
  const error = h("p", { class: "form-error", role: "alert" });
  const card = h("article", { class: "card comparison", dataset: { comparison: item.comparison_id } });
  const record = async (verdict) => {
    try {
      await post("/evaluator/reviews", { comparison_id: item.comparison_id, verdict, note: note.value.trim() || null });
      replace(card, h("p", { class: "reviewed" }, "Recorded. Thank you."));
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const side = (label, context, action) =>
    h("div", { class: "comparison-side" }, h("h3", {}, label), context ? h("pre", { class: "comparison-context" }, context) : null, h("pre", { class: "comparison-action" }, action));
  return replace(
    card,
    h("div", { class: "comparison-sides" }, side("A", item.context_a, item.action_a), side("B", item.context_b, item.action_b)),
    note,
    error,
    h("div", { class: "actions" }, VERDICTS.map((choice) => guardWrite(h("button", { class: `verdict-${choice.id}`, onclick: () => record(choice.verdict) }, choice.label), session))),
  );
}
