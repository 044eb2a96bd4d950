// The completion curve (POST /traces/{id}/completion): each independent request's estimated progress, 0–1,
// at its checkpoints, drawn on the minimap as a smooth line that never overshoots a checkpoint.
// The interpolation is monotone cubic (Fritsch–Carlson): between two checkpoints the curve stays within
// their values, so a flat stretch stays flat and a rise never peaks above the next estimate.

import { post } from "./api.js";

const ASK_MS = 2000;
const ASKS_MAX = 30;

/**
 * The trace's completion runs, asked for once (again only while another request is generating the
 * estimate, `pending`), with `reason` saying why there are none when the estimate is unavailable (no fast
 * model configured, a failed call); `stillShown()` stops the asking once the screen is gone. Failures give
 * no curve: browsing stays usable without it.
 */
export async function loadCompletionRuns(traceId, stepIndex, stillShown) {
  for (let asks = 0; asks < ASKS_MAX && stillShown(); asks += 1) {
    let answer;
    try {
      answer = await post(`/traces/${encodeURIComponent(traceId)}/completion`);
    } catch (error) {
      return { runs: [], reason: error.message };
    }
    if (answer.unavailable) return { runs: [], reason: answer.reason || "the estimate failed" };
    if (!answer.pending) return { runs: completionRuns(answer.tasks, stepIndex), reason: null };
    await new Promise((resolve) => setTimeout(resolve, ASK_MS));
  }
  return { runs: [], reason: "the estimate is still being generated; reload to look again" };
}

/** The curve's runs: one per stretch of non-null checkpoints of one task, as `{x: step index, y: 0–1, reason}`. */
export function completionRuns(tasks, stepIndex) {
  const runs = [];
  for (const task of tasks || []) {
    let run = [];
    for (const checkpoint of task.checkpoints || []) {
      const x = stepIndex.get(checkpoint.step_id);
      if (x === undefined) continue;
      // A null estimate breaks the line; so does the end of a task (independent requests never join).
      if (checkpoint.completion === null || checkpoint.completion === undefined) {
        if (run.length) runs.push(run);
        run = [];
        continue;
      }
      const point = { x, y: checkpoint.completion, reason: checkpoint.reason || "" };
      // Two checkpoints on one displayed row (a tool result moved to its call): the later one stands.
      if (run.length && run[run.length - 1].x === x) run[run.length - 1] = point;
      else run.push(point);
    }
    if (run.length) runs.push(run);
  }
  return runs.map((points) => ({ points, tangents: monotoneTangents(points) }));
}

/** Fritsch–Carlson tangents at each point of a run (x strictly increasing). */
export function monotoneTangents(points) {
  const count = points.length;
  if (count < 2) return points.map(() => 0);
  const slopes = [];
  for (let k = 0; k < count - 1; k += 1) slopes.push((points[k + 1].y - points[k].y) / (points[k + 1].x - points[k].x));
  const tangents = [slopes[0]];
  for (let k = 1; k < count - 1; k += 1) tangents.push(slopes[k - 1] * slopes[k] <= 0 ? 0 : (slopes[k - 1] + slopes[k]) / 2);
  tangents.push(slopes[count - 2]);
  for (let k = 0; k < count - 1; k += 1) {
    if (slopes[k] === 0) {
      tangents[k] = 0;
      tangents[k + 1] = 0;
      continue;
    }
    const a = tangents[k] / slopes[k];
    const b = tangents[k + 1] / slopes[k];
    const length = Math.hypot(a, b);
    // Outside the circle of radius 3 the cubic could overshoot: scale both tangents back onto it.
    if (length > 3) {
      tangents[k] = (3 / length) * a * slopes[k];
      tangents[k + 1] = (3 / length) * b * slopes[k];
    }
  }
  return tangents;
}

/** The curve at step index x: `{value, interpolated, reason}`, or null where no run covers x. */
export function completionAt(runs, x) {
  for (const { points, tangents } of runs) {
    const last = points.length - 1;
    if (x < points[0].x || x > points[last].x) continue;
    const exact = points.find((point) => point.x === x);
    if (exact) return { value: exact.y, interpolated: false, reason: exact.reason };
    const k = points.findIndex((point) => point.x > x) - 1;
    return { value: hermite(points[k], points[k + 1], tangents[k], tangents[k + 1], x), interpolated: true, reason: "" };
  }
  return null;
}

function hermite(start, end, startTangent, endTangent, x) {
  const width = end.x - start.x;
  const t = (x - start.x) / width;
  const t2 = t * t;
  const t3 = t2 * t;
  return (2 * t3 - 3 * t2 + 1) * start.y + (t3 - 2 * t2 + t) * width * startTangent + (-2 * t3 + 3 * t2) * end.y + (t3 - t2) * width * endTangent;
}

/** "completion 40 % (checkpoint: reason)" or "completion 52 % (interpolated)" for a hover line. */
export function completionText({ value, interpolated, reason }) {
  const percent = `completion ${Math.round(value * 100)} %`;
  return interpolated ? `${percent} (interpolated)` : `${percent} (checkpoint${reason ? `: ${reason}` : ""})`;
}

/** Draw the runs: `toX(step index)` and `toY(0–1)` map into the canvas; a lone checkpoint is a dot. */
export function drawCompletion(context, runs, toX, toY) {
  for (const { points, tangents } of runs) {
    if (points.length === 1) {
      context.beginPath();
      context.arc(toX(points[0].x), toY(points[0].y), 2, 0, 2 * Math.PI);
      context.fill();
      continue;
    }
    context.beginPath();
    context.moveTo(toX(points[0].x), toY(points[0].y));
    for (let k = 0; k < points.length - 1; k += 1) {
      // A cubic Hermite segment is a Bézier with control points a third of the way along each tangent.
      const third = (points[k + 1].x - points[k].x) / 3;
      context.bezierCurveTo(
        toX(points[k].x + third), toY(points[k].y + tangents[k] * third),
        toX(points[k + 1].x - third), toY(points[k + 1].y - tangents[k + 1] * third),
        toX(points[k + 1].x), toY(points[k + 1].y),
      );
    }
    context.stroke();
  }
}
