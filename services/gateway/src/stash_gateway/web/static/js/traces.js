// The traces screen: filters, the list with paging, source renaming and the Import dialog.

import { ApiError, get, post, put, query } from "./api.js";
import { guardWrite, h, localTime, navigate, replace, signed, startScreen } from "./dom.js";

const PAGE_SIZE = 50;
// The detectors of the trajectory PRM (docs/labels.md: Process patterns), most severe first.
export const PATTERNS = ["stuck_on_test", "expansion_drift", "context_thrash", "ping_pong", "repetition_loop"];
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

// Filters and paging survive going into a trace and back.
const view = { source_id: "", imported_from: "", imported_to: "", pattern: "", offset: 0, sort: null };

export async function renderTraceList(screen, session) {
  const current = startScreen();
  const [sources, listing] = await Promise.all([get("/trace-sources"), get(`/traces${listQuery()}`)]);
  if (!current()) return;
  const body = h("div", { class: "list-screen" });
  replace(
    screen,
    h("header", { class: "screen-head" },
      h("h1", {}, "Traces"),
      h("div", { class: "actions" },
        guardWrite(h("button", { class: "primary", id: "open-import", onclick: () => openImportDialog(screen, session) }, "Import traces"), session),
      ),
    ),
    session.read_only ? h("p", { class: "notice", id: "read-only-notice" }, "Read-only key: you can read everything; importing, annotating and renaming are disabled.") : null,
    filterBar(screen, session, sources),
    view.source_id ? renameControl(screen, session, sources) : null,
    body,
  );
  replace(body, traceTable(listing.traces, sources), listing.total ? pager(screen, session, listing.total, listing.traces.length) : null);
}

function listQuery() {
  const { source_id, imported_from, imported_to, pattern, offset } = view;
  // The API sorts every page (`source` A–Z, `-source` Z–A); unset is newest import first.
  const sort = view.sort === "asc" ? "source" : view.sort === "desc" ? "-source" : "";
  return query({ limit: PAGE_SIZE, offset, source_id, imported_from, imported_to, pattern, sort, tz: TIME_ZONE });
}

function filterBar(screen, session, sources) {
  const refresh = () => {
    view.offset = 0;
    renderTraceList(screen, session);
  };
  const bind = (name) => (event) => {
    view[name] = event.target.value;
    refresh();
  };
  const sourceSelect = h("select", { id: "filter-source", onchange: bind("source_id") },
    h("option", { value: "" }, "All sources"),
    sources.map((source) => h("option", { value: source.source_id, selected: source.source_id === view.source_id }, `${source.name || source.source_id} (${source.trace_count})`)),
  );
  const patternSelect = h("select", { id: "filter-pattern", onchange: bind("pattern") },
    h("option", { value: "" }, "Any pattern"),
    PATTERNS.map((name) => h("option", { value: name, selected: name === view.pattern }, name)),
  );
  return h("div", { class: "filters", role: "search" },
    h("label", {}, "Source ", sourceSelect),
    h("label", {}, "Imported from ", h("input", { type: "date", id: "filter-from", value: view.imported_from, onchange: bind("imported_from") })),
    h("label", {}, "to ", h("input", { type: "date", id: "filter-to", value: view.imported_to, onchange: bind("imported_to") })),
    h("label", {}, "Pattern ", patternSelect),
    h("span", { class: "hint" }, `Dates are inclusive days in ${TIME_ZONE}.`),
  );
}

function renameControl(screen, session, sources) {
  const source = sources.find((item) => item.source_id === view.source_id);
  const name = h("input", { id: "rename-source", value: source ? source.name : "", maxlength: "120", "aria-label": "Source name" });
  const status = h("span", { class: "hint", role: "status" });
  const save = guardWrite(h("button", { type: "submit" }, "Rename"), session);
  return h("form", {
    class: "rename",
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        await put("/trace-sources", { source_id: view.source_id, name: name.value });
        renderTraceList(screen, session);
      } catch (error) {
        status.textContent = error.message;
      }
    },
  }, h("span", {}, "Source ", h("code", {}, view.source_id), " is called "), name, save, status);
}

function traceTable(traces, sources) {
  if (!traces.length) return h("p", { class: "empty" }, "No traces match. Import a file, or connect an agent to send traces live.");
  const names = new Map(sources.map((source) => [source.source_id, source.name || source.source_id]));
  const rows = traces.map((trace) => ({ trace, source: names.get(trace.source_id) || trace.source_name || trace.source_id }));
  const sortLabel = view.sort === "asc" ? " ▲" : view.sort === "desc" ? " ▼" : "";
  const sortButton = h("button", { class: "sort", id: "sort-source", onclick: (event) => cycleSort(event) }, `Source${sortLabel}`);
  return h("table", { class: "traces", id: "trace-table" },
    h("thead", {}, h("tr", {},
      h("th", {}, "Title"), h("th", { "aria-sort": view.sort === "asc" ? "ascending" : view.sort === "desc" ? "descending" : "none" }, sortButton),
      h("th", { class: "num" }, "Steps"), h("th", {}, "Imported"), h("th", { class: "num" }, "Score"), h("th", {}, "Outcome"),
      h("th", { class: "num", title: "positive / negative ratings" }, "Ratings"), h("th", { class: "num" }, "Comments"),
      h("th", {}, "Patterns"),
    )),
    h("tbody", {}, rows.map(({ trace, source }) => traceRow(trace, source))),
  );
}

function cycleSort(event) {
  view.sort = view.sort === null ? "asc" : view.sort === "asc" ? "desc" : null;
  view.offset = 0;
  window.dispatchEvent(new PopStateEvent("popstate"));
}

function traceRow(trace, source) {
  const evaluation = trace.evaluation || {};
  const open = () => navigate(`/traces/${encodeURIComponent(trace.id)}`);
  return h("tr", { dataset: { traceId: trace.id }, tabindex: "0", onclick: open, onkeydown: (event) => event.key === "Enter" && open() },
    h("td", { class: "title" }, h("a", { href: `/traces/${encodeURIComponent(trace.id)}`, "data-link": "" }, trace.title || "(untitled)")),
    h("td", {}, h("button", { class: "chip", title: "Show only this source", onclick: (event) => selectSource(event, trace.source_id) }, source)),
    h("td", { class: "num" }, trace.step_count),
    h("td", {}, localTime(trace.created_at)),
    h("td", { class: "num score" }, evaluation.score === null || evaluation.score === undefined ? "—" : signed(evaluation.score)),
    h("td", {}, evaluation.outcome ? h("span", { class: `outcome ${evaluation.outcome}` }, evaluation.outcome.replaceAll("_", " ")) : "pending"),
    h("td", { class: "num" }, `+${trace.positive_count} / −${trace.negative_count}`),
    h("td", { class: "num" }, trace.comment_count),
    h("td", { class: "pattern-cell" }, patternChips(trace.process_patterns)),
  );
}

function patternChips(names) {
  // null: the labeler was out of reach, so the patterns are unknown rather than absent.
  if (names === null || names === undefined) return h("span", { class: "hint" }, "unknown");
  if (!names.length) return "—";
  return names.map((name) => h("span", { class: "pattern-chip", title: "process pattern" }, name));
}

function selectSource(event, sourceId) {
  event.stopPropagation();
  view.source_id = sourceId;
  view.offset = 0;
  window.dispatchEvent(new PopStateEvent("popstate"));
}

function pager(screen, session, total, shown) {
  const first = view.offset + 1;
  const move = (offset) => {
    view.offset = Math.max(0, offset);
    renderTraceList(screen, session);
  };
  return h("div", { class: "pager" },
    h("span", { id: "page-range" }, `${first}–${view.offset + shown} of ${total}`),
    h("button", { id: "page-prev", disabled: view.offset === 0, onclick: () => move(view.offset - PAGE_SIZE) }, "← Newer"),
    h("button", { id: "page-next", disabled: view.offset + shown >= total, onclick: () => move(view.offset + PAGE_SIZE) }, "Older →"),
  );
}

async function openImportDialog(screen, session) {
  const formats = await get("/formats");
  const file = h("input", { type: "file", id: "import-file", accept: ".json,.jsonl,.ndjson,.txt,application/json" });
  const paste = h("textarea", { id: "import-paste", rows: "8", placeholder: "…or paste JSON / JSONL here", spellcheck: "false" });
  const format = h("select", { id: "import-format" },
    h("option", { value: "auto" }, "auto (detect)"),
    formats.filter((item) => item.name !== "auto").map((item) => h("option", { value: item.name, title: item.description }, item.name)),
  );
  const source = h("input", { id: "import-source", maxlength: "200", placeholder: "optional: overrides the recorded source" });
  const error = h("pre", { class: "form-error", id: "import-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary", id: "import-submit" }, "Import");
  const dialog = h("dialog", { class: "dialog wide", id: "import-dialog", onclose: () => dialog.remove() },
    h("form", { method: "dialog", onsubmit: (event) => importTraces(event, { file, paste, format, source, error, submit, dialog, screen, session }) },
      h("h2", {}, "Import traces"),
      h("p", { class: "hint" }, "OpenAI, Anthropic, OpenTelemetry, Langfuse, LangSmith, Claude Code, Codex or Stash JSONL. All or nothing: one bad trace stops the import."),
      h("label", { for: "import-file" }, "File"), file,
      h("label", { for: "import-paste" }, "Or paste"), paste,
      h("div", { class: "row" },
        h("label", {}, "Format ", format),
        h("label", { class: "grow" }, "Source id ", source),
      ),
      error,
      h("div", { class: "actions" }, submit, h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")),
    ),
  );
  document.body.append(dialog);
  dialog.showModal();
}

async function importTraces(event, parts) {
  event.preventDefault();
  const { file, paste, format, source, error, submit, dialog, screen, session } = parts;
  error.textContent = "";
  const data = file.files.length ? await file.files[0].text() : paste.value;
  if (!data.trim()) {
    error.textContent = "Choose a file or paste traces first.";
    return;
  }
  submit.disabled = true;
  submit.textContent = "Importing…";
  try {
    const body = { format: format.value, data };
    if (source.value.trim()) body.source_id = source.value.trim();
    const result = await post("/traces/import", body);
    dialog.close();
    view.offset = 0;
    if (result.trace_ids.length === 1) navigate(`/traces/${encodeURIComponent(result.trace_ids[0])}`);
    else renderTraceList(screen, session);
  } catch (failure) {
    // The API's own words: they name the line or trace and the field.
    error.textContent = failure instanceof ApiError ? `${failure.status}: ${failure.message}` : failure.message;
  } finally {
    submit.disabled = false;
    submit.textContent = "Import";
  }
}
