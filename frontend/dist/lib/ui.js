// Small shared pieces for the built-in panels: live data hooks, badges, times, notes.
// Operator plugins may import this module too (/admin/lib/ui.js), but only ctx is a contract.

import { html, useState, useEffect, useRef, useCallback } from '../vendor/preact-htm.js';
import { fmt } from './fmt.js';

/**
 * useLive loads data now and every `ms` through ctx.poll (so it pauses while hidden or off
 * tab), again whenever `deps` change, and keeps the last good answer when a refresh fails.
 * Answers that arrive after a newer load started are dropped.
 */
export function useLive(ctx, load, ms, deps = []) {
  const [state, setState] = useState({ data: null, error: null, at: 0, loading: true });
  const seq = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const stopRef = useRef(null);

  useEffect(() => {
    const run = async () => {
      const mine = ++seq.current;
      try {
        const data = await loadRef.current();
        if (mine === seq.current) setState({ data, error: null, at: Date.now(), loading: false });
      } catch (error) {
        if (mine === seq.current) setState((s) => ({ ...s, error, loading: false }));
      }
    };
    setState((s) => ({ ...s, loading: true }));
    const stop = ctx.poll(run, ms);
    stopRef.current = stop;
    return () => {
      seq.current++;
      stop();
    };
  }, deps);

  const refresh = useCallback(() => stopRef.current && stopRef.current.now(), []);
  const setData = useCallback(
    (data) => setState((s) => ({ ...s, data: typeof data === 'function' ? data(s.data) : data, error: null, at: Date.now() })),
    []
  );
  return { ...state, refresh, setData };
}

// Author names by id, from GET /api/admin/budgets (which lists every author), shared by the
// panels and refreshed at most once a minute.
let authorCache = { at: 0, names: null, pending: null };

function loadAuthors(ctx) {
  if (authorCache.names && Date.now() - authorCache.at < 60_000) return Promise.resolve(authorCache.names);
  if (!authorCache.pending) {
    authorCache.pending = ctx.api('/api/admin/budgets', { query: { limit: 1000 } }).then(
      (r) => {
        const names = {};
        for (const b of (r && r.budgets) || []) names[b.userId] = b.name;
        authorCache = { at: Date.now(), names, pending: null };
        return names;
      },
      (e) => {
        authorCache.pending = null;
        throw e;
      }
    );
  }
  return authorCache.pending;
}

/** useAuthors returns {id: name} for the authors; ids without a name show as numbers. */
export function useAuthors(ctx) {
  const [names, setNames] = useState(authorCache.names || {});
  useEffect(() => {
    let alive = true;
    const stop = ctx.poll(async () => {
      const n = await loadAuthors(ctx);
      if (alive) setNames(n);
    }, 60_000);
    return () => {
      alive = false;
      stop();
    };
  }, []);
  return names;
}

/** An author: the name with the id beside it, or the id alone. */
export function Author({ id, names }) {
  const name = names && names[id];
  if (!name) return html`<span class="num">#${id}</span>`;
  return html`<span class="author" title=${'user ' + id}>${name} <span class="muted small num">#${id}</span></span>`;
}

/** Re-renders every `ms` while mounted; returns the current time. */
export function useNow(ms = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

/** A relative time with the absolute one on hover: <time title="2025-…">in 3m</time>. */
export function Rel({ at, now, testid }) {
  if (!at) return html`<span class="muted">—</span>`;
  return html`<time datetime=${at} title=${fmt.time(at) + ' (' + fmt.time(at, { utc: true }) + ')'} data-testid=${testid}>${fmt.relative(at, now)}</time>`;
}

export function Badge({ kind = 'neutral', children, testid, title }) {
  return html`<span class=${'badge badge-' + kind} data-testid=${testid} title=${title}>${children}</span>`;
}

/** Why a job or attempt waits, and a human explanation. null means ready. */
export const WHY = {
  none: { label: 'ready', kind: 'ok', short: 'due for the next worker', text: 'due — waits for the next worker or sweep' },
  unreachable: { label: 'unreachable', kind: 'err', short: 'model unreachable — backoff', text: 'the model could not be reached — retries with backoff (1 min doubling to 1 h)' },
  upstream: { label: 'upstream', kind: 'warn', short: 'model error — backoff or Retry-After', text: 'the model answered an error — retries after the backoff or its Retry-After' },
  unanswered: { label: 'unanswered', kind: 'warn', short: 'bad model answer — backoff', text: 'the model answer was not the expected JSON — retries with backoff' },
  budget: { label: 'budget', kind: 'info', short: 'waits for the daily reset', text: "the author's daily budget is spent — waits for the daily reset (00:00 UTC)" },
  'budget-unavailable': { label: 'budget-unavailable', kind: 'err', short: 'budget not countable — backoff', text: 'the budget could not be counted — retries with backoff' },
  held: { label: 'held', kind: 'info', short: 'held by an admin', text: 'an admin holds this work — nothing is claimed, charged or asked until the hold is lifted' },
  breaker: { label: 'breaker', kind: 'info', short: 'not asked: waits for the model\'s probe', text: 'not asked: the model is failing; owed waits for its probe (no attempt, nothing charged)' },
  review: { label: 'review', kind: 'info', short: 'waits for a moderator', text: 'the model was unsure — waits for a moderator in the Review panel; nothing is asked or charged meanwhile' },
  refused: { label: 'refused', kind: 'err', short: 'refused before sending — backoff', text: 'the request was refused before sending (e.g. the item is past the model\'s size limits) — nothing asked or charged; retries with backoff until the item is fixed or deleted' },
  unavailable: { label: 'unavailable', kind: 'err', short: 'database failed — backoff', text: 'the database failed while the job ran — retries with backoff' },
};
export const WHYS = ['none', 'unreachable', 'upstream', 'unanswered', 'budget', 'budget-unavailable', 'refused', 'unavailable', 'held', 'breaker', 'review'];

export function whyInfo(why) {
  return WHY[why || 'none'] || { label: why, kind: 'neutral', text: why };
}

export function WhyBadge({ why, long }) {
  const w = whyInfo(why);
  return html`<span class="why">
    <${Badge} kind=${w.kind} title=${w.text}>${w.label}<//>
    ${long ? html`<span class="why-text">${w.text}</span>` : null}
  </span>`;
}

/** A note for a failed load: inline when there is nothing to show, a strip above stale data. */
export function LoadError({ error, at, retry }) {
  if (!error) return null;
  const stale = at ? ` Showing data from ${fmt.relative(new Date(at).toISOString())}.` : '';
  const what = at ? 'Could not refresh' : 'Could not load';
  return html`<div class="note note-err" role="alert" data-testid="load-error">
    <span><strong>${what}:</strong> ${error.message || String(error)}${stale}</span>
    ${retry ? html`<button type="button" class="btn btn-small" onClick=${retry}>Retry</button>` : null}
  </div>`;
}

export function Loading({ children = 'Loading…' }) {
  return html`<p class="muted loading" aria-busy="true">${children}</p>`;
}

export function Empty({ children }) {
  return html`<p class="empty">${children}</p>`;
}

/** A figure with a label: the building block of summary strips. */
export function Stat({ label, value, sub, testid, kind }) {
  return html`<div class=${'stat' + (kind ? ' stat-' + kind : '')} data-testid=${testid}>
    <div class="stat-label">${label}</div>
    <div class="stat-value">${value}</div>
    ${sub ? html`<div class="stat-sub">${sub}</div>` : null}
  </div>`;
}

/** A horizontal bar drawn in SVG (no inline style), value out of max. */
export function HBar({ value, max, cls = '', label }) {
  const pct = max > 0 ? Math.max(0, Math.min(100, (value / max) * 100)) : 0;
  return html`<svg class=${'hbar ' + cls} viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label=${label || `${value} of ${max}`}>
    <rect class="hbar-track" x="0" y="0" width="100" height="10" rx="0" />
    <rect class="hbar-fill" x="0" y="0" width=${pct} height="10" rx="0" />
  </svg>`;
}

/** Props for a cursor-paged table's "more" button. */
export function MoreButton({ cursor, busy, onClick, label = 'More', testid }) {
  if (!cursor) return null;
  return html`<div class="more">
    <button type="button" class="btn" disabled=${busy} onClick=${onClick} data-testid=${testid}>${busy ? 'Loading…' : label}</button>
  </div>`;
}

/** Table wrapper: scrolls horizontally inside its card on narrow screens. */
export function TableWrap({ children, label }) {
  return html`<div class="table-wrap" role="region" aria-label=${label} tabindex="0">${children}</div>`;
}

/** The error fields of a form: the message and which field to highlight. */
export function useFormError() {
  const [err, setErr] = useState(null);
  return {
    err,
    set: (e) => setErr(e ? { message: e.message || String(e), field: e.field || null } : null),
    clear: () => setErr(null),
    invalid: (field) => !!(err && err.field === field),
  };
}

/** The outcome of one attempt event: allow, block, scored, pending, gone. */
export function OutcomeBadge({ outcome }) {
  const kind = { allow: 'ok', scored: 'ok', block: 'err', pending: 'warn', gone: 'neutral', decided: 'accent', overturned: 'accent' }[outcome] || 'neutral';
  return html`<${Badge} kind=${kind}>${outcome || '—'}<//>`;
}

/** An attempt's result: the art score or the verdict confidence. */
export function resultOf(e) {
  if (e.art != null) return 'art ' + Number(e.art).toFixed(3);
  if (e.confidence != null) return 'conf ' + Number(e.confidence).toFixed(2);
  return '—';
}

/** An attempt event's number, 1 for the first: events carry the attempts made before it. */
export function attemptNo(e) {
  return e.attempt == null ? '—' : String(Number(e.attempt) + 1);
}

/**
 * FilterInput is a text filter that applies on Enter and on blur, never while typing, and that
 * a live refresh never overwrites: what the user types is a draft of its own until applied,
 * and a new value from outside (a link, back/forward, Clear) replaces the draft only while
 * the field is not being edited.
 */
export function FilterInput({ id, value, onApply, testid, ...rest }) {
  const [draft, setDraft] = useState(value || '');
  const editing = useRef(false);
  useEffect(() => {
    if (!editing.current) setDraft(value || '');
  }, [value]);
  const apply = (v) => {
    const next = String(v).trim();
    if (next !== (value || '')) onApply(next);
  };
  return html`<input id=${id} type="search" value=${draft} data-testid=${testid} autocomplete="off" spellcheck="false" ...${rest}
    onFocus=${() => (editing.current = true)}
    onInput=${(e) => {
      editing.current = true;
      setDraft(e.currentTarget.value);
    }}
    onKeyDown=${(e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        apply(e.currentTarget.value);
      } else if (e.key === 'Escape' && draft !== (value || '')) {
        e.preventDefault();
        e.stopPropagation();
        setDraft(value || '');
      }
    }}
    onBlur=${(e) => {
      editing.current = false;
      apply(e.currentTarget.value);
    }} />`;
}

/** An attempt's error text, cut to one line in tables (the whole text on hover). */
export function ErrorText({ text, testid }) {
  if (!text) return html`<span class="muted">—</span>`;
  return html`<span class="err-text" title=${text} data-testid=${testid}>${text}</span>`;
}

export const num = (v) => (v === '' || v === null || v === undefined ? null : Number(v));

/** A confirmation: focus on its confirm button, Esc cancels; `disabled` greys out only the confirm. */
export function Confirm({ text, confirmLabel, danger, busy, disabled, onConfirm, onCancel, testid }) {
  const ok = useRef(null);
  useEffect(() => {
    ok.current && ok.current.focus();
    const onKey = (e) => {
      if (e.key === 'Escape' && !e.defaultPrevented) {
        e.preventDefault();
        onCancel();
      }
    };
    // Capture: before the detail's own Esc (which closes it) sees the key.
    addEventListener('keydown', onKey, true);
    return () => removeEventListener('keydown', onKey, true);
  }, []);
  return html`<div class="confirm" role="alertdialog" aria-label=${text} data-testid=${testid}>
    <p>${text} <span class="muted small">(Esc cancels)</span></p>
    <div class="row">
      <button type="button" ref=${ok} class=${'btn ' + (danger ? 'btn-danger' : 'btn-primary')} disabled=${busy || disabled} onClick=${onConfirm} data-testid=${testid + '-ok'}>${confirmLabel}</button>
      <button type="button" class="btn btn-quiet" disabled=${busy} onClick=${onCancel} data-testid=${testid + '-cancel'}>Cancel</button>
    </div>
  </div>`;
}

/** An audit entry's before or after value, short: JSON without quotes around keys. */
export function AuditValue({ v }) {
  if (v === null || v === undefined) return html`<span class="muted">—</span>`;
  return html`<code class="small audit-value">${JSON.stringify(v).replace(/"([A-Za-z]+)":/g, '$1: ')}</code>`;
}

const ITEM_KINDS = new Set(['revision', 'comment', 'pitch']);

/** The item a target of the audit trail names ("revision:7"), else null. */
export function itemOfTarget(target) {
  const m = /^([a-z]+):(\d+)$/.exec(target || '');
  return m && ITEM_KINDS.has(m[1]) ? { kind: m[1], id: m[2] } : null;
}

/** A link to an item's page (/admin/items/{kind}/{id}), opened in the console. */
export function ItemPageLink({ ctx, kind, id, testid, title, children }) {
  const path = `/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;
  return html`<a href=${'/admin/items' + path} data-testid=${testid} title=${title || `The page of ${kind} ${id}: its whole history`}
    onClick=${(e) => {
      if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
      e.preventDefault();
      ctx.navigate('items', path);
    }}>${children}</a>`;
}

/** The header cells of an attempt's columns (AttemptCells), after its When. */
export function AttemptHeads() {
  return html`<th scope="col" class="num" title="1 is the first attempt">Attempt</th><th scope="col">Outcome</th><th scope="col">Why</th>
    <th scope="col">Error or note</th><th scope="col" class="num">Status</th><th scope="col" class="num">Upstream</th><th scope="col" class="num">Result</th><th scope="col" class="num">Request</th><th scope="col" class="num">Runs</th>`;
}

/** One attempt event's cells: its number, outcome, why, error (or who decided and why), status, timing and result. */
export function AttemptCells({ e }) {
  return html`<td class="num" data-label="attempt">${attemptNo(e)}</td>
    <td><${OutcomeBadge} outcome=${e.outcome} />${e.verdict ? html` <span class="small">${e.verdict}</span>` : null}</td>
    <td>${e.why ? html`<${WhyBadge} why=${e.why} />` : html`<span class="muted">—</span>`}</td>
    <td class="c-err">${e.outcome === 'decided' || e.outcome === 'overturned'
      ? html`<span class="small">by admin #${e.adminId}${e.note ? html`: <q>${e.note}</q>` : ''}</span>`
      : html`<${ErrorText} text=${e.error} />`}</td>
    <td class="num" data-label="status">${e.status ?? '—'}</td>
    <td class="num" data-label="upstream">${e.upstreamMs == null ? '—' : fmt.duration(e.upstreamMs)}</td>
    <td class="num" data-label="result">${resultOf(e)}</td>
    <td class="num" data-label="request">${fmt.bytes(e.requestBytes)}</td>
    <td class="num" data-label="runs">${e.runs ?? '—'}</td>`;
}
