// The JSON client behind ctx.api. Same-origin cookie session; every state-changing request
// carries X-Owed-Request: 1, which the server requires of cookie-authenticated writes (CSRF).

import { fmt } from './fmt.js';

/** An API failure: `.status` (0 for a network failure), `.code`, `.field`, `.message`. */
export class ApiError extends Error {
  constructor(status, code, message, field = null, body = null) {
    super(message || `request failed (${status})`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code || (status ? 'http_' + status : 'network');
    this.field = field || null;
    this.body = body;
  }
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Builds "path?query" from a query object, leaving out null, undefined and "" values. */
export function withQuery(path, query) {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === null || v === undefined || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => params.append(k, String(x)));
    else params.set(k, String(v));
  }
  const qs = params.toString();
  if (!qs) return path;
  return path + (path.includes('?') ? '&' : '?') + qs;
}

/**
 * createApi returns api(path, {method, body, query, headers, signal}) → parsed JSON, or null
 * for 204 (and for a 304 with nothing cached). A path without a leading slash is taken under
 * /api/. onUnauthorized is called for a 401 on anything but the session routes.
 */
export function createApi({ onUnauthorized } = {}) {
  const lastBody = new Map(); // url → last parsed GET body, answered again on a 304

  return async function api(path, opts = {}) {
    const method = (opts.method || (opts.body !== undefined ? 'POST' : 'GET')).toUpperCase();
    let url = path.startsWith('/') ? path : '/api/' + path;
    url = withQuery(url, opts.query);
    const headers = { Accept: 'application/json', ...(opts.headers || {}) };
    if (!SAFE.has(method)) headers['X-Owed-Request'] = '1';
    let body;
    if (opts.body !== undefined && opts.body !== null) {
      if (typeof opts.body === 'string' || opts.body instanceof FormData || opts.body instanceof Blob) {
        body = opts.body;
      } else {
        body = JSON.stringify(opts.body);
        headers['Content-Type'] = 'application/json';
      }
    }

    let res;
    try {
      res = await fetch(url, { method, headers, body, credentials: 'same-origin', signal: opts.signal });
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', 'The server could not be reached. Check your connection.');
    }

    if (res.status === 204) return null;
    if (res.status === 304) return lastBody.has(url) ? lastBody.get(url) : null;

    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }

    if (!res.ok) {
      const e = data && data.error ? data.error : {};
      const message = readableTimes(e.message) || defaultMessage(res.status, text);
      const err = new ApiError(res.status, e.code, message, e.field, data);
      if (res.status === 401 && onUnauthorized && !url.startsWith('/api/session')) onUnauthorized(err);
      throw err;
    }
    if (text && data === null) {
      throw new ApiError(res.status, 'bad_response', 'The server answered something that is not JSON.');
    }
    if (method === 'GET') lastBody.set(url, data);
    return data;
  };
}

// A server message's timestamps ("… the reset at 2026-03-02T00:00:00.000Z …") read as the
// console writes times: local, with how far off.
const ISO = /\b\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)/g;

function readableTimes(message) {
  return message && message.replace(ISO, (iso) => `${fmt.time(iso)} (${fmt.relative(iso)})`);
}

function defaultMessage(status, text) {
  switch (status) {
    case 400:
      return 'The request was not valid.';
    case 401:
      return 'Your session has ended. Sign in again.';
    case 403:
      return 'You are not allowed to do this.';
    case 404:
      return 'Not found.';
    case 409:
      return 'That conflicts with the current state. Refresh and try again.';
    case 413:
      return 'That is too large.';
    case 429:
      return 'Too many requests. Wait a moment and try again.';
    default:
      if (status >= 500) return `The server failed (${status}).`;
      return (text && text.length < 200 ? text.trim() : '') || `Request failed (${status}).`;
  }
}
