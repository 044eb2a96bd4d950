// The top minimap of step credit: positive up, negative down from a baseline; exact zero and unscored
// steps get only a baseline tick. ±1 (the default) fixes the limits; Fit uses the largest |credit|.
// With a model's learned action credit (`learned`: step index → credit) it is a heatmap instead: each
// action a full-height cell, green or red, as strong as its |credit|.

function cssColor(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function drawMinimap(canvas, steps, { fit, range, selected, learned }) {
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (!width || !height) return;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const context = canvas.getContext("2d");
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  const credits = learned ? steps.map((_, index) => learned.get(index) ?? null) : steps.map((step) => (step.metadata.reward ? step.metadata.reward.score : null));
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
}
