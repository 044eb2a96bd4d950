// The REST API as the browser calls it: the session cookie authenticates, writes carry the CSRF token.

const API = "/api/v1/rm";
const ADMIN = "/api/v1/admin/";
let csrfToken = "";

/** An error answer of the API, with its `detail` worded as the API words it. */
export class ApiError extends Error {
  constructor(status, detail, field) {
    super(detail);
    this.status = status;
    this.field = field;
  }
}

export function setCsrf(token) {
  csrfToken = token;
}

function detailText(body, fallback) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  // FastAPI's own validation errors: a list of {loc, msg}.
  if (Array.isArray(detail)) return detail.map((item) => `${(item.loc || []).join(".")}: ${item.msg}`).join("; ");
  return fallback;
}

/** Call `path` (under /ui, /api/v1/admin or the API prefix); JSON in, JSON (or text) out; ApiError on 4xx/5xx.
 * `extra` headers go with it (the operator's admin key, held only in the page's memory). */
export async function request(method, path, body, extra = {}) {
  const headers = { Accept: "application/json", ...extra };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-Stash-CSRF"] = csrfToken;
  const url = path.startsWith("/ui/") || path.startsWith(ADMIN) ? path : API + path;
  const response = await fetch(url, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const text = await response.text();
  const json = (response.headers.get("content-type") || "").includes("json");
  if (!response.ok) {
    let parsed = null;
    try {
      parsed = json ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    throw new ApiError(response.status, detailText(parsed, text || response.statusText), parsed && parsed.field);
  }
  return json ? JSON.parse(text) : text;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
export const patch = (path, body) => request("PATCH", path, body);
export const put = (path, body) => request("PUT", path, body);
export const del = (path) => request("DELETE", path);
/** A GET of an operator's route (under /api/v1/admin) with the admin key the operator typed. */
export const adminGet = (path, key) => request("GET", ADMIN + path, undefined, { Authorization: `Bearer ${key}` });

/** A query string of the set values of `params`. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== "" && value !== null && value !== undefined) search.set(name, value);
  const text = search.toString();
  return text ? `?${text}` : "";
}
