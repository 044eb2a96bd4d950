// Annotation dialogs and items: rate and comment on a quote, a step or the whole trace; edit, delete,
// and flag a wrong label with a note. Every write is a call of the public REST API.

import { del, patch, post } from "./api.js";
import { disableWith, guardWrite, h, localTime } from "./dom.js";

/** Open the create or edit dialog; `onSaved(annotation)` runs after the API accepted it. */
export function openAnnotationDialog({ session, traceId, step, quote, existing, onSaved }) {
  const ratingAllowed = !step || step.role !== "system";
  const current = existing ? existing.rating : null;
  const choice = (value, label, id) =>
    h("label", { class: `rating-choice ${id}` },
      h("input", { type: "radio", name: "rating", value: String(value), id: `rating-${id}`, checked: current === value, disabled: !ratingAllowed }),
      label);
  const comment = h("textarea", { id: "annotation-comment", rows: "4", placeholder: "What was good or wrong here?", value: existing && existing.comment ? existing.comment : "" });
  const error = h("p", { class: "form-error", role: "alert" });
  const shownQuote = quote || (existing && existing.quote);
  const target = step ? `step ${step.index + 1}` : "the whole trace";
  const dialog = h("dialog", { class: "dialog", id: "annotation-dialog", onclose: () => dialog.remove() },
    h("form", { method: "dialog", onsubmit: (event) => save(event) },
      h("h2", {}, existing ? "Edit annotation" : shownQuote ? `Annotate a quote of ${target}` : `Comment on ${target}`),
      shownQuote ? h("blockquote", { class: "quote", id: "annotation-quote" }, h("span", { class: "quote-context" }, shownQuote.prefix.slice(-40)), h("mark", {}, shownQuote.text), h("span", { class: "quote-context" }, shownQuote.suffix.slice(0, 40))) : null,
      h("fieldset", { class: "ratings" },
        h("legend", {}, "Rating"),
        choice(1, "+ Good", "up"), choice(-1, "− Bad", "down"), choice(0, "No rating", "none"),
        ratingAllowed ? null : h("p", { class: "hint" }, "System steps are context, not agent actions: they take comments only."),
      ),
      h("label", { for: "annotation-comment" }, "Comment"),
      comment,
      error,
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "annotation-save" }, "Save"), h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")),
    ),
  );

  async function save(event) {
    event.preventDefault();
    const picked = dialog.querySelector("input[name=rating]:checked");
    const rating = picked && Number(picked.value) !== 0 ? Number(picked.value) : null;
    const text = comment.value.trim() || null;
    if (rating === null && text === null) {
      error.textContent = "Give a rating, a comment, or both.";
      return;
    }
    try {
      const saved = existing
        ? await patch(`/annotations/${encodeURIComponent(existing.id)}`, { rating, comment: text })
        : await post(`/traces/${encodeURIComponent(traceId)}/annotations`, { step_id: step ? step.id : null, rating, comment: text, quote: quote || null });
      dialog.close();
      onSaved(saved);
    } catch (failure) {
      error.textContent = failure.message;
    }
  }

  document.body.append(dialog);
  dialog.showModal();
  comment.focus();
}

function openFlagDialog(annotation, onSaved) {
  const note = h("textarea", { id: "label-error-note", rows: "3", placeholder: "Why is this label wrong?" });
  const error = h("p", { class: "form-error", role: "alert" });
  const dialog = h("dialog", { class: "dialog", id: "flag-dialog", onclose: () => dialog.remove() },
    h("form", { method: "dialog", onsubmit: async (event) => {
      event.preventDefault();
      try {
        onSaved(await patch(`/annotations/${encodeURIComponent(annotation.id)}`, { label_error: true, label_error_note: note.value.trim() || null }));
        dialog.close();
      } catch (failure) {
        error.textContent = failure.message;
      }
    } },
      h("h2", {}, "Flag as a label error"),
      h("p", { class: "hint" }, "A flagged annotation stays visible but is left out of training, GEPA and the rating counts."),
      h("label", { for: "label-error-note" }, "Note"), note, error,
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "flag-save" }, "Flag"), h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")),
    ),
  );
  document.body.append(dialog);
  dialog.showModal();
  note.focus();
}

/** One annotation with its controls; `onChange(annotation|null)` after an edit, flag or delete. */
export function annotationItem(annotation, { session, traceId, step, onChange, reviewing = false }) {
  // Only the author changes what an annotation says; the trace's owner may also delete it; anyone may flag it.
  const theirs = annotation.author_id !== session.user_id;
  const guardAuthor = (button, may, doing) => (theirs && !may ? disableWith(button, `Written by ${annotation.author_name}: only its author can ${doing} it.`) : guardWrite(button, session));
  const rating = annotation.rating === 1 ? h("span", { class: "rating up", title: "rated good" }, "+") : annotation.rating === -1 ? h("span", { class: "rating down", title: "rated bad" }, "−") : null;
  const flagged = annotation.label_error;
  const unflag = async () => onChange(await patch(`/annotations/${encodeURIComponent(annotation.id)}`, { label_error: false, label_error_note: null }));
  const remove = async () => {
    if (!confirm("Delete this annotation?")) return;
    await del(`/annotations/${encodeURIComponent(annotation.id)}`);
    onChange(null);
  };
  return h("li", { class: `annotation${flagged ? " flagged" : ""}`, dataset: { annotationId: annotation.id } },
    h("div", { class: "annotation-body" },
      rating,
      annotation.quote ? h("q", { class: "quoted" }, annotation.quote.text) : null,
      annotation.comment ? h("span", { class: "comment" }, annotation.comment) : null,
    ),
    flagged ? h("div", { class: "flag-note" }, h("strong", {}, "Label error"), annotation.label_error_note ? `: ${annotation.label_error_note}` : " (no note)") : null,
    h("div", { class: "annotation-meta" },
      h("span", {}, `${annotation.author_name} · ${localTime(annotation.created_at)}`),
      guardAuthor(h("button", { class: "link-button", onclick: () => openAnnotationDialog({ session, traceId, step, existing: annotation, onSaved: onChange }) }, "Edit"), false, "edit"),
      flagged
        ? guardWrite(h("button", { class: "link-button", onclick: unflag }, "Unflag"), session)
        : guardWrite(h("button", { class: "link-button flag", onclick: () => openFlagDialog(annotation, onChange) }, "Flag label error"), session),
      guardAuthor(h("button", { class: "link-button danger", onclick: remove }, "Delete"), !reviewing, "delete"),
    ),
  );
}
