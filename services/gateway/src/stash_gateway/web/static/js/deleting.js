// Deleting a reward model or a GEPA run from its page: never while its job is queued or running, since a
// delete does not cancel the job (the API answers 409).

import { del } from "./api.js";
import { guardWrite, h, navigate } from "./dom.js";

/** The row's Delete button: disabled with the reason while its job is active; it asks, deletes, then shows `back`. */
export function deleteButton(session, row, { id, label, noun, path, back, question }) {
  const active = row.status === "queued" || row.status === "running";
  const button = guardWrite(h("button", {
    class: "danger", id, disabled: active,
    title: active ? `A ${noun} can be deleted once it succeeded or failed` : question,
    onclick: async () => {
      if (!confirm(question)) return;
      button.disabled = true;
      await del(path);
      navigate(back);
    },
  }, label), session);
  return button;
}
