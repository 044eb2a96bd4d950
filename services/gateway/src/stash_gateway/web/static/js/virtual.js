// A virtualised list of rows of varying height: only the rows near the viewport are in the DOM.
// Heights start as an estimate and are replaced by measurements (a ResizeObserver keeps them current,
// so expanding a message or opening a breakdown re-lays the rows below it).

const OVERSCAN_PX = 800;

export class VirtualList {
  /** `renderRow(index)` returns the row element; rows are absolutely placed inside `scroller`. */
  constructor(scroller, count, renderRow, estimatePx = 110) {
    this.scroller = scroller;
    this.count = count;
    this.renderRow = renderRow;
    this.heights = new Float64Array(count).fill(estimatePx);
    this.offsets = new Float64Array(count + 1);
    this.rows = new Map();
    this.canvas = document.createElement("div");
    this.canvas.className = "virtual-canvas";
    scroller.append(this.canvas);
    this.observer = new ResizeObserver((entries) => this.measured(entries));
    this.layout(0);
    scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.update();
  }

  layout(from) {
    for (let index = from; index < this.count; index += 1) this.offsets[index + 1] = this.offsets[index] + this.heights[index];
    this.canvas.style.height = `${this.offsets[this.count]}px`;
  }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.update();
    });
  }

  /** The first row whose bottom is below `y`. */
  indexAt(y) {
    let low = 0;
    let high = this.count - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.offsets[middle + 1] <= y) low = middle + 1;
      else high = middle;
    }
    return Math.max(0, low);
  }

  /** The rows now within the viewport (for the minimap's window and keyboard moves). */
  visibleRange() {
    const top = this.scroller.scrollTop;
    return [this.indexAt(top), this.indexAt(top + this.scroller.clientHeight)];
  }

  update() {
    if (!this.count) return;
    const top = this.scroller.scrollTop;
    const first = this.indexAt(Math.max(0, top - OVERSCAN_PX));
    const last = this.indexAt(top + this.scroller.clientHeight + OVERSCAN_PX);
    for (const [index, row] of this.rows) {
      if (index < first || index > last) {
        this.observer.unobserve(row);
        row.remove();
        this.rows.delete(index);
      }
    }
    for (let index = first; index <= last; index += 1) if (!this.rows.has(index)) this.mount(index);
    if (this.onrange) this.onrange(this.visibleRange());
  }

  mount(index) {
    const row = this.renderRow(index);
    row.dataset.index = String(index);
    row.classList.add("virtual-row");
    row.style.transform = `translateY(${this.offsets[index]}px)`;
    this.canvas.append(row);
    this.rows.set(index, row);
    this.observer.observe(row);
  }

  measured(entries) {
    let from = this.count;
    let shiftAbove = 0;
    const top = this.scroller.scrollTop;
    for (const entry of entries) {
      const index = Number(entry.target.dataset.index);
      if (!this.rows.has(index)) continue;
      const height = entry.borderBoxSize ? entry.borderBoxSize[0].blockSize : entry.target.offsetHeight;
      if (Math.abs(height - this.heights[index]) < 0.5) continue;
      // A row that grows above the viewport would push what is being read down: keep it in place.
      if (this.offsets[index + 1] <= top) shiftAbove += height - this.heights[index];
      this.heights[index] = height;
      from = Math.min(from, index);
    }
    if (from === this.count) return;
    this.layout(from);
    for (const [index, row] of this.rows) if (index > from) row.style.transform = `translateY(${this.offsets[index]}px)`;
    if (shiftAbove) this.scroller.scrollTop = top + shiftAbove;
    this.schedule();
  }

  /** Re-render one row in place (after its annotations or its expanded state changed). */
  refresh(index) {
    const old = this.rows.get(index);
    if (!old) return;
    this.observer.unobserve(old);
    this.rows.delete(index);
    const scroll = this.scroller.scrollTop;
    old.remove();
    this.mount(index);
    this.scroller.scrollTop = scroll;
  }

  /** Scroll so that row `index` starts near the top, then draw it; rows drawn on the way are measured
   *  at once, since their estimated heights above it would otherwise leave it off target. */
  scrollTo(index, marginPx = 12) {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      this.scroller.scrollTop = Math.max(0, this.offsets[index] - marginPx);
      this.update();
      if (!this.measureNow()) break;
    }
  }

  measureNow() {
    let from = this.count;
    for (const [index, row] of this.rows) {
      const height = row.offsetHeight;
      if (Math.abs(height - this.heights[index]) < 0.5) continue;
      this.heights[index] = height;
      from = Math.min(from, index);
    }
    if (from === this.count) return false;
    this.layout(from);
    for (const [index, row] of this.rows) row.style.transform = `translateY(${this.offsets[index]}px)`;
    return true;
  }

  /** Keep row `index` in view, scrolling as little as possible. */
  reveal(index) {
    const top = this.scroller.scrollTop;
    const bottom = top + this.scroller.clientHeight;
    if (this.offsets[index] < top) this.scrollTo(index);
    else if (this.offsets[index] + Math.min(this.heights[index], this.scroller.clientHeight / 2) > bottom) this.scrollTo(index);
    else this.update();
  }

  row(index) {
    return this.rows.get(index) || null;
  }
}
