// The top minimap of step credit: positive up, negative down from a baseline; exact zero and unscored
// steps get only a baseline tick. A step's automatic credit is its expected credit (from the label
// probabilities) where it has one, else its score. ±1 (the default) fixes the limits; Fit uses the largest |credit|.
// With a model's learned action credit (`learned`: step index → credit) it is a heatmap instead: each
// action a full-height cell, green or red, as strong as its |credit|.
// `completion` (runs from completion.js) overlays the faint teal completion curve on its own fixed 0–100 %
// right axis; credit keeps the left axis, whose limit follows Fit / ±1.

import { drawCompletion } from "./completion.js";
import { h } from "./dom.js";

/** A step's automatic (rule) reward: `rule_reward` beside an imported `reward`, else `reward`; null for none. */
export function automaticReward(step) {
  const { reward, rule_reward: rules, reward_source: source } = step.metadata;
  return rules ?? (source === "imported" ? null : reward) ?? null;
}

/** A step's automatic credit (−1..+1): the expected credit of its label probabilities where it has one, else its
 *  score; null for a step without one. */
export function stepCredit(step) {
  const reward = automaticReward(step);
  if (!reward) return null;
  return reward.expected_credit ?? reward.score;
}

/** The score a trace imported with the step (`metadata.reward` marked imported), or null. */
export function importedScore(step) {
  const { reward, reward_source: source } = step.metadata;
  if (source !== "imported" || reward === null || reward === undefined) return null;
  const value = typeof reward === "number" ? reward : reward.score ?? reward.expected_credit;
  return typeof value === "number" ? value : null;
}

/** What the minimap's marks mean, whose credit it shows, and what the completion curve is (or why it is missing). */
export function minimapLegend({ learnedName, completion }) {
  const source = learnedName ? `learned credit of ${learnedName}` : "automatic credit";
  return h("p", { class: "minimap-legend", id: "minimap-legend" },
    h("span", {}, learnedName ? `Cells: ${source}, −1…+1 (stronger is larger)` : `Bars: ${source}, −1…+1 on the left axis`),
    legendKey("positive", "positive"), legendKey("negative", "negative"), legendKey("tick", "unscored or 0"),
    completionStatus(completion),
  );
}

function legendKey(kind, text) {
  return [h("span", { class: `legend-key ${kind}`, "aria-hidden": "true" }), text];
}

/** The legend's second line, there from the first paint: the estimate arriving later moves nothing below it
 * (a reader selecting text to quote would otherwise see it jump). `completion.pending` until it is in. */
function completionStatus(completion) {
  if (completion.reason) {
    const text = `Completion curve unavailable: ${completion.reason}`;
    return h("span", { class: "completion-status", id: "completion-missing", title: text }, text);
  }
  if (completion.runs.length) return h("span", { class: "completion-status" }, legendKey("completion", "estimated completion, 0–100 % on the right axis"));
  return h("span", { class: "completion-status", id: "completion-pending" }, completion.pending ? "Completion curve: estimating…" : "Completion curve: no estimate for these steps");
}

function cssColor(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function drawMinimap(canvas, steps, { fit, range, selected, learned, completion }) {
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (!width || !height) return;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const context = canvas.getContext("2d");
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  const credits = learned ? steps.map((_, index) => learned.get(index) ?? null) : steps.map(stepCredit);
  const largest = Math.max(0, ...credits.map((credit) => Math.abs(credit || 0)));
  const limit = fit && largest > 0 ? largest : 1;
  const middle = height / 2;
  const slot = width / steps.length;
  const bar = Math.max(1, Math.min(slot - (slot > 3 ? 1 : 0), 12));
  if (range) {
    context.fillStyle = cssColor("--minimap-window");
    // At least a few pixels wide, so the viewport's place still shows on a 5,000-step trace.
    context.fillRect(range[0] * slot, 0, Math.max(4, (range[1] - range[0] + 1) * slot), height);
  }
  context.fillStyle = cssColor("--line");
  context.fillRect(0, middle, width, 1);
  const positive = cssColor("--good");
  const negative = cssColor("--bad");
  const tick = cssColor("--muted");
  credits.forEach((credit, index) => {
    const x = index * slot + (slot - bar) / 2;
    if (!credit) {
      context.fillStyle = tick;
      context.fillRect(x, middle - 2, bar, 5);
      return;
    }
    if (learned) {
      context.globalAlpha = 0.25 + 0.75 * (Math.min(Math.abs(credit), limit) / limit);
      context.fillStyle = credit > 0 ? positive : negative;
      context.fillRect(x, 2, bar, height - 4);
      context.globalAlpha = 1;
      return;
    }
    const extent = (Math.min(Math.abs(credit), limit) / limit) * (middle - 3);
    context.fillStyle = credit > 0 ? positive : negative;
    context.fillRect(x, credit > 0 ? middle - extent : middle + 1, bar, extent);
  });
  if (selected >= 0) {
    context.fillStyle = cssColor("--accent");
    context.fillRect(selected * slot + slot / 2 - 1, 0, 2, height);
  }
  if (completion && completion.length) {
    context.strokeStyle = context.fillStyle = cssColor("--completion");
    context.lineWidth = 1.5;
    context.globalAlpha = 0.75;
    drawCompletion(context, completion, (x) => x * slot + slot / 2, (value) => height - 3 - value * (height - 6));
    context.globalAlpha = 1;
  }
  drawAxes(context, width, height, learned ? null : limit, completion && completion.length);
}

/** Corner labels: the credit limit on the left (none for the heatmap), 100 % and 0 % on the right. */
function drawAxes(context, width, height, limit, withCompletion) {
  context.font = "10px system-ui, sans-serif";
  if (limit !== null) {
    const value = limit === 1 ? "1" : limit.toFixed(2);
    axisLabel(context, `+${value}`, 3, 2, "left", "top", cssColor("--muted"));
    axisLabel(context, `\u2212${value}`, 3, height - 1, "left", "bottom", cssColor("--muted"));
  }
  if (!withCompletion) return;
  axisLabel(context, "100%", width - 3, 2, "right", "top", cssColor("--completion"));
  axisLabel(context, "0%", width - 3, height - 1, "right", "bottom", cssColor("--completion"));
}

/** A label on a backing of the minimap's own colour, so bars under it do not hide it. */
function axisLabel(context, text, x, y, align, baseline, color) {
  context.textAlign = align;
  context.textBaseline = baseline;
  const textWidth = context.measureText(text).width;
  const left = align === "left" ? x - 1 : x - textWidth - 1;
  const top = baseline === "top" ? y - 1 : y - 11;
  context.globalAlpha = 0.85;
  context.fillStyle = cssColor("--surface");
  context.fillRect(left, top, textWidth + 2, 12);
  context.globalAlpha = 1;
  context.fillStyle = color;
  context.fillText(text, x, y);
}
