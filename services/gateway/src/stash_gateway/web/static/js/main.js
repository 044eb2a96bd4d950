// The UI's entry: sign-in, the shell (left sidebar, screen area), the router and the theme control.

import { ApiError, del, get, post, setCsrf } from "./api.js";
import { READ_ONLY_REASON, copyText, guardWrite, h, navigate, replace } from "./dom.js";
import { renderTraceList } from "./traces.js";
import { renderTrace } from "./trace.js";

const root = document.getElementById("app");

// The screens of the left rail. Models, skills (GEPA) and the section explorer add entries here.
const NAV = [
  { id: "traces", label: "Traces", path: "/traces", matches: (path) => path === "/" || path.startsWith("/traces") },
  { id: "models", label: "Reward models", path: "/models", matches: (path) => path.startsWith("/models") },
  { id: "skills", label: "Skills (GEPA)", path: "/skills", matches: (path) => path.startsWith("/skills") },
  { id: "evaluator", label: "Shared evaluator", path: "/evaluator", matches: (path) => path.startsWith("/evaluator") },
  { id: "shared", label: "Shared with me", path: "/shared", matches: (path) => path.startsWith("/shared") },
  { id: "reviewers", label: "Reviewers", path: "/reviewers", matches: (path) => path.startsWith("/reviewers") },
];

// The screens past the traces load on first use, so the first page stays small.
const lazy = (module, name) => async (...args) => (await import(module))[name](...args);
const renderSections = lazy("./sections.js", "renderSections");
const renderModelList = lazy("./models.js", "renderModelList");
const renderTrainPicker = lazy("./models.js", "renderTrainPicker");
const renderModel = lazy("./models.js", "renderModel");
const renderSkillRuns = lazy("./skills.js", "renderSkillRuns");
const renderSkillRun = lazy("./skills.js", "renderSkillRun");
const renderEvaluator = lazy("./evaluator.js", "renderEvaluator");
const renderReviewers = lazy("./reviewers.js", "renderReviewers");
const renderShared = lazy("./reviewers.js", "renderShared");

const ROUTES = [
  { pattern: /^\/(traces\/?)?$/, render: (screen, session) => renderTraceList(screen, session) },
  { pattern: /^\/traces\/([^/]+)$/, render: (screen, session, id) => renderTrace(screen, session, decodeURIComponent(id)) },
  { pattern: /^\/traces\/([^/]+)\/sections$/, render: (screen, session, id) => renderSections(screen, session, decodeURIComponent(id)) },
  { pattern: /^\/models\/?$/, render: (screen, session) => renderModelList(screen, session) },
  { pattern: /^\/models\/new$/, render: (screen, session) => renderTrainPicker(screen, session) },
  { pattern: /^\/models\/([^/]+)$/, render: (screen, session, id) => renderModel(screen, session, decodeURIComponent(id)) },
  { pattern: /^\/skills\/?$/, render: (screen, session) => renderSkillRuns(screen, session) },
  { pattern: /^\/skills\/([^/]+)$/, render: (screen, session, id) => renderSkillRun(screen, session, decodeURIComponent(id)) },
  { pattern: /^\/evaluator\/?$/, render: (screen, session) => renderEvaluator(screen, session) },
  { pattern: /^\/reviewers\/?$/, render: (screen, session) => renderReviewers(screen, session) },
  { pattern: /^\/shared\/?$/, render: (screen, session) => renderShared(screen, session) },
];

let session = null;

async function boot() {
  try {
    startSession(await get("/ui/session"));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showSignIn();
    if (error instanceof ApiError && error.status === 403) return showDisabled(error.message);
    replace(root, h("div", { class: "page-message" }, h("h1", {}, "Stash RM is not reachable"), h("p", {}, error.message)));
  }
}

function startSession(signedIn) {
  session = signedIn;
  setCsrf(signedIn.csrf);
  renderShell();
  route();
}

function showSignIn(message) {
  const key = h("input", { type: "password", name: "key", id: "sign-in-key", autocomplete: "off", required: true, placeholder: "srm_…" });
  const error = h("p", { class: "form-error", role: "alert" }, message || "");
  const form = h(
    "form",
    { class: "sign-in card", onsubmit: (event) => signIn(event, key, error) },
    h("div", { class: "brand big" }, h("span", { class: "brand-mark" }, "S"), "Stash RM"),
    h("h1", {}, "Sign in"),
    h("label", { for: "sign-in-key" }, "API key"),
    key,
    h("p", { class: "hint" }, "A key from ", h("code", {}, "stash-rm users create NAME"), " or ", h("code", {}, "stash-rm keys create NAME"), ". It is kept in an HttpOnly cookie for this browser session."),
    error,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  root.className = "signed-out";
  replace(root, form);
  key.focus();
}

async function signIn(event, key, error) {
  event.preventDefault();
  error.textContent = "";
  try {
    const signedIn = await post("/ui/session", { key: key.value });
    history.replaceState(null, "", location.pathname === "/" ? "/traces" : location.pathname);
    startSession(signedIn);
  } catch (failure) {
    if (failure instanceof ApiError && failure.status === 403) return showDisabled(failure.message);
    error.textContent = failure instanceof ApiError && failure.status === 401 ? "That key is not valid (unknown or revoked)." : failure.message;
  }
}

/** The accounts switch: reward models are off for this account, so there is nothing to show. */
function showDisabled(reason) {
  root.className = "signed-out";
  replace(
    root,
    h(
      "div",
      { class: "page-message card", id: "account-disabled" },
      h("h1", {}, "Reward models are switched off for this account"),
      h("p", {}, "Traces, annotations and models stay stored but cannot be viewed or changed until an operator switches them back on (", h("code", {}, "stash-rm users enable NAME"), ")."),
      h("p", { class: "hint" }, reason),
      h("button", { onclick: signOut }, "Sign out"),
    ),
  );
}

async function signOut() {
  await del("/ui/session");
  session = null;
  history.replaceState(null, "", "/");
  showSignIn();
}

function renderShell() {
  root.className = "shell";
  const nav = h("nav", { class: "nav", "aria-label": "Screens" });
  const screen = h("main", { id: "screen", tabindex: "-1" });
  const themeButton = h("button", { class: "theme-toggle", id: "theme-toggle", onclick: () => toggleTheme(themeButton) });
  showThemeLabel(themeButton);
  replace(
    root,
    h(
      "aside",
      { class: "sidebar" },
      h("a", { class: "brand", href: "/traces", "data-link": "" }, h("span", { class: "brand-mark" }, "S"), "Stash RM"),
      nav,
      h("div", { class: "sidebar-foot" },
        h("button", { class: "link-button", id: "connect-agent", onclick: () => openConnectDialog() }, "Connect an agent"),
        h("div", { class: "whoami" }, h("span", { id: "user-name" }, session.user_name), session.read_only ? h("span", { class: "badge", title: READ_ONLY_REASON }, "read-only key") : null),
        h("button", { class: "link-button", id: "sign-out", onclick: signOut }, "Sign out"),
        themeButton,
      ),
    ),
    screen,
  );
  root.addEventListener("click", followLink);
}

function renderNav() {
  const nav = root.querySelector(".nav");
  replace(nav, NAV.map((item) => h("a", { href: item.path, "data-link": "", class: item.matches(location.pathname) ? "active" : "" }, item.label)));
}

function followLink(event) {
  const link = event.target.closest("a[data-link]");
  if (!link || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(link.getAttribute("href"));
}

async function route() {
  if (!session) return;
  renderNav();
  const screen = document.getElementById("screen");
  const path = location.pathname;
  for (const candidate of ROUTES) {
    const match = path.match(candidate.pattern);
    if (match) {
      try {
        await candidate.render(screen, session, ...match.slice(1));
      } catch (error) {
        showError(screen, error);
      }
      return;
    }
  }
  showNotFound(screen, "There is no page at this address.");
}

/** What a screen shows when loading failed: sign-in again, the accounts switch, not found, or the reason. */
function showError(screen, error) {
  if (error instanceof ApiError && error.status === 401) return showSignIn("Your session ended; sign in again.");
  if (error instanceof ApiError && error.status === 403 && /disabled/.test(error.message)) return showDisabled(error.message);
  if (error instanceof ApiError && error.status === 404) return showNotFound(screen, `This ${location.pathname.startsWith("/models") ? "model" : location.pathname.startsWith("/skills") ? "run" : "trace"} does not exist, or it belongs to another account.`);
  replace(screen, h("div", { class: "page-message", role: "alert" }, h("h1", {}, "Something went wrong"), h("p", {}, error.message)));
}

function showNotFound(screen, text) {
  replace(screen, h("div", { class: "page-message", id: "not-found" }, h("h1", {}, "Not found"), h("p", {}, text), h("a", { href: "/traces", "data-link": "" }, "Back to traces")));
}

function showThemeLabel(button) {
  const dark = document.documentElement.dataset.theme === "dark";
  button.textContent = dark ? "☀ Light theme" : "☾ Dark theme";
  button.setAttribute("aria-label", dark ? "Switch to the light theme" : "Switch to the dark theme");
}

function toggleTheme(button) {
  const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = next;
  try {
    localStorage.setItem("stash-theme", next);
  } catch {
    // Private windows may refuse storage; the theme still applies to this page.
  }
  showThemeLabel(button);
  document.dispatchEvent(new CustomEvent("stash-theme"));
}

/** The three OTLP settings for this server, with a new key for the agent (shown once) and an optional source. */
function openConnectDialog() {
  const endpoint = `${location.origin}/api/v1/rm/otel`;
  const agent = { key: "<stash api key>" };
  const source = h("input", { id: "connect-source", placeholder: "optional, e.g. support-bot", maxlength: "200" });
  const settingsText = () => {
    const sourceHeader = source.value.trim() ? `,X-Stash-Trace-Source=${source.value.trim()}` : "";
    return `OTEL_EXPORTER_OTLP_ENDPOINT=${endpoint}\nOTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer ${agent.key}${sourceHeader}"\nOTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`;
  };
  const settings = h("pre", { class: "settings", id: "connect-settings" });
  const show = () => (settings.textContent = `${settingsText()}   # or http/json`);
  source.addEventListener("input", show);
  show();
  const error = h("p", { class: "form-error", role: "alert" });
  const create = guardWrite(h("button", { class: "primary", onclick: () => createAgentKey(agent, create, error, show) }, "Create a key for this agent"), session);
  const copy = h("button", { onclick: () => copyText(copy, settingsText()) }, "Copy settings");
  const dialog = h(
    "dialog",
    { class: "dialog", id: "connect-dialog", onclose: () => dialog.remove() },
    h("h2", {}, "Connect an agent"),
    h("p", {}, "Any OpenTelemetry instrumentation (GenAI conventions, OpenInference, OpenLLMetry) sends its traces live with three settings:"),
    settings,
    h("p", { class: "hint" }, "The agent needs a full-access key. Your own key stays in this browser's HttpOnly cookie, so create one for the agent; it is shown once."),
    h("label", { for: "connect-source" }, "Source id (optional: groups this agent's runs; sent as the X-Stash-Trace-Source header)"),
    source,
    error,
    h("div", { class: "actions" }, create, copy, h("button", { onclick: () => dialog.close() }, "Close")),
  );
  document.body.append(dialog);
  dialog.showModal();
}

async function createAgentKey(agent, button, error, show) {
  try {
    const created = await post("/keys", { name: "otlp-agent", read_only: false });
    agent.key = created.key;
    button.disabled = true;
    show();
  } catch (failure) {
    error.textContent = failure.message;
  }
}

window.addEventListener("popstate", route);
boot();
