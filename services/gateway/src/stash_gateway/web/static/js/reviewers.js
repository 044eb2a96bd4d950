// Reviewers: the owner's page to share traces (every source or chosen ones) with teammates, and the
// reviewer's "Shared with me" list of the traces others share, with the owner's filters, paging and sorting.

import { del, get, put, query } from "./api.js";
import { guardWrite, h, localTime, navigate, replace, signed, startScreen } from "./dom.js";
import { PATTERNS } from "./traces.js";

const PAGE_SIZE = 50;
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const shared = { owner_id: "", source_id: "", imported_from: "", imported_to: "", pattern: "", offset: 0, sort: "imported" };

export async function renderReviewers(screen, session) {
  const current = startScreen();
  const [grants, sources] = await Promise.all([get("/reviewers"), get("/trace-sources")]);
  if (!current()) return;
  const error = h("p", { class: "form-error", id: "grant-error", role: "alert" });
  const form = grantForm(screen, session, choosableSources(sources, grants), error);
  replace(
    screen,
    h("header", { class: "screen-head" }, h("h1", {}, "Reviewers")),
    h("p", { class: "hint page-hint" }, "Reviewers read and annotate the traces you share; they cannot delete, relabel, score or train on them, and never see your reward models. Sharing again with a reviewer replaces what they see (Change fills in the form); removing a reviewer takes effect on their next request."),
    form.element,
    error,
    grantTable(screen, session, grants, form.edit),
  );
}

// The form that shares traces with a reviewer, and `edit(grant)`, which fills it with a grant to change.
function grantForm(screen, session, sources, error) {
  const name = h("input", { id: "grant-reviewer", required: true, maxlength: "200", placeholder: "user name", "aria-label": "Reviewer's user name" });
  const every = h("input", { type: "checkbox", id: "grant-all", checked: true });
  const boxes = sources.map((source) => h("input", { type: "checkbox", value: source.source_id, class: "grant-source", disabled: true }));
  every.addEventListener("change", () => boxes.forEach((box) => (box.disabled = every.checked)));
  const submit = guardWrite(h("button", { type: "submit", class: "primary", id: "grant-submit" }, "Share"), session);
  const edit = (grant) => {
    name.value = grant.reviewer_name;
    every.checked = grant.all_sources;
    boxes.forEach((box) => {
      box.checked = grant.source_ids.includes(box.value);
      box.disabled = every.checked;
    });
    name.focus();
  };
  const element = h("form", {
    class: "grant-form card",
    id: "grant-form",
    onsubmit: async (event) => {
      event.preventDefault();
      error.textContent = "";
      const chosen = boxes.filter((box) => box.checked).map((box) => box.value);
      try {
        await put(`/reviewers/${encodeURIComponent(name.value.trim())}`, { source_ids: every.checked ? null : chosen });
        renderReviewers(screen, session);
      } catch (failure) {
        error.textContent = failure.message;
      }
    },
  },
    h("label", { for: "grant-reviewer" }, "Share with"), name,
    h("label", { class: "inline" }, every, " every source (also future ones)"),
    h("div", { class: "grant-sources" }, sources.map((source, index) => h("label", { class: "inline" }, boxes[index], ` ${source.name || source.source_id}`))),
    submit,
  );
  return { element, edit };
}

// The owner's sources, and those a grant names that hold no trace (yet), so that changing a grant keeps them.
function choosableSources(sources, grants) {
  const known = new Set(sources.map((source) => source.source_id));
  const granted = new Set(grants.flatMap((grant) => grant.source_ids).filter((sourceId) => !known.has(sourceId)));
  return [...sources, ...[...granted].map((sourceId) => ({ source_id: sourceId, name: sourceId }))];
}

function grantTable(screen, session, grants, edit) {
  if (!grants.length) return h("p", { class: "empty", id: "no-reviewers" }, "You share no traces yet.");
  return h("table", { class: "traces", id: "grant-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Reviewer"), h("th", {}, "Shares"), h("th", {}, "Since"), h("th", {}, ""))),
    h("tbody", {}, grants.map((grant) => h("tr", { dataset: { reviewer: grant.reviewer_name } },
      h("td", {}, grant.reviewer_name),
      h("td", {}, grant.all_sources ? "every source" : grant.source_ids.join(", ")),
      h("td", {}, localTime(grant.created_at)),
      h("td", { class: "grant-actions" },
        guardWrite(h("button", { class: "link-button", onclick: () => edit(grant) }, "Change"), session),
        guardWrite(h("button", { class: "link-button danger", onclick: async () => {
          await del(`/reviewers/${encodeURIComponent(grant.reviewer_name)}`);
          renderReviewers(screen, session);
        } }, "Remove"), session),
      ),
    ))),
  );
}

export async function renderShared(screen, session) {
  const current = startScreen();
  const { owner_id, source_id, imported_from, imported_to, pattern, offset, sort } = shared;
  const [owners, sources, listing] = await Promise.all([
    get("/shared/owners"),
    get("/shared/sources"),
    get(`/shared/traces${query({ limit: PAGE_SIZE, offset, owner_id, source_id, imported_from, imported_to, pattern, sort, tz: TIME_ZONE })}`),
  ]);
  if (!current()) return;
  const refresh = (name) => (event) => {
    shared[name] = event.target.value;
    shared.offset = 0;
    renderShared(screen, session);
  };
  replace(
    screen,
    h("header", { class: "screen-head" }, h("h1", {}, "Shared with me")),
    h("div", { class: "filters", role: "search" },
      h("label", {}, "Owner ", h("select", { id: "shared-owner", onchange: (event) => {
        shared.source_id = "";
        refresh("owner_id")(event);
      } },
        h("option", { value: "" }, "Every owner"),
        owners.map((grant) => h("option", { value: grant.owner_id, selected: grant.owner_id === owner_id }, `${grant.owner_name} (${grant.all_sources ? "every source" : grant.source_ids.join(", ")})`)),
      )),
      h("label", {}, "Source ", sourceSelect(screen, session, sources)),
      h("label", {}, "Imported from ", h("input", { type: "date", id: "shared-from", value: imported_from, onchange: refresh("imported_from") })),
      h("label", {}, "to ", h("input", { type: "date", id: "shared-to", value: imported_to, onchange: refresh("imported_to") })),
      h("label", {}, "Pattern ", h("select", { id: "shared-pattern", onchange: refresh("pattern") }, h("option", { value: "" }, "Any pattern"), PATTERNS.map((name) => h("option", { value: name, selected: name === pattern }, name)))),
      h("label", {}, "Sort ", h("select", { id: "shared-sort", onchange: refresh("sort") },
        [["imported", "newest import"], ["source", "source A–Z"], ["-source", "source Z–A"]].map(([value, label]) => h("option", { value, selected: value === sort }, label)),
      )),
    ),
    sharedTable(listing.traces),
    listing.total ? pager(screen, session, listing.total, listing.traces.length) : null,
  );
}

// The owners' sources the caller may see, named as their owners name them: a source is one owner's, so choosing
// it also chooses its owner.
function sourceSelect(screen, session, sources) {
  const choices = sources.filter((source) => !shared.owner_id || source.owner_id === shared.owner_id);
  const choose = (event) => {
    const chosen = event.target.value === "" ? null : choices[Number(event.target.value)];
    shared.source_id = chosen ? chosen.source_id : "";
    if (chosen) shared.owner_id = chosen.owner_id;
    shared.offset = 0;
    renderShared(screen, session);
  };
  return h("select", { id: "shared-source", onchange: choose },
    h("option", { value: "" }, "All sources"),
    choices.map((source, index) => h("option", {
      value: String(index),
      selected: source.source_id === shared.source_id && source.owner_id === shared.owner_id,
    }, `${source.name} (${source.owner_name}, ${source.trace_count})`)),
  );
}

function sharedTable(traces) {
  if (!traces.length) return h("p", { class: "empty", id: "shared-empty" }, "Nobody shares traces with you (or none match).");
  return h("table", { class: "traces", id: "shared-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Title"), h("th", {}, "Owner"), h("th", {}, "Source"), h("th", { class: "num" }, "Steps"), h("th", {}, "Imported"), h("th", { class: "num" }, "Score"), h("th", { class: "num" }, "Ratings"))),
    h("tbody", {}, traces.map((trace) => {
      const open = () => navigate(`/traces/${encodeURIComponent(trace.id)}`);
      return h("tr", { dataset: { traceId: trace.id }, tabindex: "0", onclick: open, onkeydown: (event) => event.key === "Enter" && open() },
        h("td", { class: "title" }, h("a", { href: `/traces/${encodeURIComponent(trace.id)}`, "data-link": "" }, trace.title || "(untitled)")),
        h("td", { class: "owner" }, trace.owner_name),
        h("td", {}, trace.source_name || trace.source_id),
        h("td", { class: "num" }, trace.step_count),
        h("td", {}, localTime(trace.created_at)),
        h("td", { class: "num score" }, signed((trace.evaluation || {}).score)),
        h("td", { class: "num" }, `+${trace.positive_count} / −${trace.negative_count}`),
      );
    })),
  );
}

function pager(screen, session, total, count) {
  const move = (offset) => {
    shared.offset = Math.max(0, offset);
    renderShared(screen, session);
  };
  return h("div", { class: "pager" },
    h("span", { id: "shared-range" }, `${shared.offset + 1}–${shared.offset + count} of ${total}`),
    h("button", { disabled: shared.offset === 0, onclick: () => move(shared.offset - PAGE_SIZE) }, "← Newer"),
    h("button", { disabled: shared.offset + count >= total, onclick: () => move(shared.offset + PAGE_SIZE) }, "Older →"),
  );
}
