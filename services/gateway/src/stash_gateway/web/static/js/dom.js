// Small DOM helpers: elements from data, never from HTML strings (so content cannot inject markup).

/** An element: `h("button", {class: "x", onclick: fn, disabled: true}, "text", child)`. */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "value") element.value = value;
    else if (name in element && typeof value !== "string") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

/** Append strings, nodes and (nested) arrays of them; null and false are skipped. */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
  return parent;
}

/** Replace everything inside `parent`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

/** A signed number with a fixed number of decimals ("+0.35", "−1.00"); what rounds to zero is "0.00", never "−0.00". */
export function signed(value, digits = 2) {
  if (value === null || value === undefined) return "—";
  const text = Math.abs(value).toFixed(digits);
  if (Number(text) === 0) return text;
  return value > 0 ? `+${text}` : `−${text}`;
}

/** A local date and time for an ISO timestamp. */
export function localTime(iso) {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** A write control that a read-only key cannot use: disabled, with the reason as its tooltip. */
export function guardWrite(element, session) {
  return session.read_only ? disableWith(element, READ_ONLY_REASON) : element;
}

/** A control the caller may see but not use: disabled, with the reason as its tooltip. */
export function disableWith(element, reason) {
  element.disabled = true;
  element.title = reason;
  element.classList.add("read-only");
  return element;
}

/** Why a reviewer cannot `doing` on a trace shared with them (the gateway answers 403 with the same words). */
export function reviewerReason(doing) {
  return `Shared with you for review: only the trace's owner can ${doing}.`;
}

export const READ_ONLY_REASON = "Signed in with a read-only key: sign in with a full-access key to change data.";

/** Copy text to the clipboard, saying so on the button for a moment. */
export async function copyText(button, text) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => (button.textContent = label), 1200);
}

/** Show another screen without reloading the page (the shell's router listens for popstate). */
export function navigate(path) {
  history.pushState(null, "", path);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

let screenTicket = 0;

/** Start drawing a screen: the returned check is false once a later screen started, so a slow answer
 *  for a screen the user already left never replaces the one in front of them. */
export function startScreen() {
  const ticket = ++screenTicket;
  return () => ticket === screenTicket;
}
